// Package pins keeps kadm in go.mod beside kgo: the franz-go suites in tests/ecosystem/test_franz_go.py run
// kadm's own tests at this pinned version, and `make go-modules` downloads what go.mod lists.
package pins

import _ "github.com/twmb/franz-go/pkg/kadm"
