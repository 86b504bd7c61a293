"""Settings every test shares: hypothesis without its timing checks.

Hypothesis fails an example that runs longer than 200 ms (`deadline`) and a test whose data takes long to
generate (`HealthCheck.too_slow`). Both measure the machine, not the code: on a busy 2-core machine (the
suite beside another, or CI) an example that takes 20 ms alone takes ten times that, and the run fails
with no defect. A property test's claims are its assertions; how fast it runs belongs in `make bench`.
The profile is loaded here, before any test module is imported, so every `@settings(...)` that names
neither inherits it; a test that names one must name `deadline=None` as well (see
`tests/unit/test_hypothesis_settings.py`)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("pybroker", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pybroker")
