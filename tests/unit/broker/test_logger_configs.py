"""Broker-logger configs (resource type 8): DescribeConfigs lists each logger's effective level and
IncrementalAlterConfigs SETs/DELETEs one at runtime, taking effect at once, as Kafka's broker-loggers."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from pybroker.broker.app import BrokerApp
from pybroker.broker.loggers.levels import LEVELS, LogLevelError, LogLevels
from pybroker.broker.loggers.structlog_setup import configure_logging, get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import describe_configs as dc
from pybroker.protocol.messages import incremental_alter_configs as iac
from tests.unit.broker.conftest import RawClient

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture(autouse=True)
def _fresh_levels() -> Iterator[None]:
    LEVELS.reset("INFO")
    yield
    LEVELS.reset("INFO")
    structlog.reset_defaults()


def test_a_logger_takes_its_nearest_ancestors_level() -> None:
    levels = LogLevels()
    levels.register("pybroker.storage.log_loader")
    assert {"root", "pybroker", "pybroker.storage", "pybroker.storage.log_loader"} <= set(levels.names())
    levels.set("pybroker.storage", "DEBUG")
    assert levels.level("pybroker.storage.log_loader") == "DEBUG"
    assert levels.level("pybroker") == "INFO"
    levels.unset("pybroker.storage")
    assert levels.level("pybroker.storage.log_loader") == "INFO"


@pytest.mark.parametrize(("operation", "name", "value", "invalid_config"), [
    ("SET", "pybroker.nothing", "DEBUG", True),
    ("SET", "root", "LOUD", True),
    ("SET", "root", None, True),
    ("DELETE", "root", None, False),
    ("APPEND", "root", "DEBUG", False),
    ("7", "root", "DEBUG", False),
])
def test_refused_changes_say_why(operation: str, name: str, value: str | None, invalid_config: bool) -> None:
    with pytest.raises(LogLevelError) as refused:
        LogLevels().validate(operation, name, value)
    assert refused.value.invalid_config is invalid_config and str(refused.value)


def test_a_level_set_at_runtime_applies_to_a_logger_bound_before() -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    log = get_logger("pybroker.test_levels")
    log.debug("hidden")
    LEVELS.set("pybroker.test_levels", "DEBUG")
    log.debug("shown")
    LEVELS.set("pybroker", "ERROR")
    log.warning("still shown: its own level wins")
    LEVELS.unset("pybroker.test_levels")
    log.warning("hidden: pybroker is at ERROR")
    events = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert events == ["shown", "still shown: its own level wins"]


async def _alter(client: RawClient, name: str, *configs: tuple[str, int, str | None],
                 validate_only: bool = False) -> iac.AlterConfigsResourceResponse:
    response = await client.call(iac.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
        iac.AlterConfigsResource(resource_type=8, resource_name=name, configs=[
            iac.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in configs])]), 1)
    result: iac.AlterConfigsResourceResponse = response.responses[0]
    return result


async def _describe(client: RawClient, name: str, keys: list[str] | None = None) -> dc.DescribeConfigsResult:
    response = await client.call(dc.DescribeConfigsRequest(resources=[dc.DescribeConfigsResource(
        resource_type=8, resource_name=name, configuration_keys=keys)]), 4)
    result: dc.DescribeConfigsResult = response.results[0]
    return result


async def test_set_describe_and_delete_a_loggers_level(app: BrokerApp, client: RawClient) -> None:
    node = str(app.state.node_id)
    LEVELS.register("pybroker.connection")
    before = await _describe(client, node)
    levels = {c.name: c.value for c in before.configs}
    assert levels["root"] == "INFO" and levels["pybroker.connection"] == "INFO"
    assert all(c.config_source == 6 and not c.read_only for c in before.configs)

    result = await _alter(client, node, ("pybroker.connection", SET, "DEBUG"))
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    after = await _describe(client, node, ["pybroker.connection", "pybroker", "no.such"])
    assert [(c.name, c.value) for c in after.configs] == [("pybroker.connection", "DEBUG"), ("pybroker", "INFO")]

    result = await _alter(client, node, ("pybroker.connection", DELETE, None))
    assert result.error_code == ErrorCode.NONE
    assert LEVELS.level("pybroker.connection") == "INFO"


async def test_a_refused_change_changes_nothing(app: BrokerApp, client: RawClient) -> None:
    node = str(app.state.node_id)
    LEVELS.register("pybroker.connection")
    result = await _alter(client, node, ("pybroker.connection", SET, "DEBUG"), ("root", SET, "NOISY"))
    assert result.error_code == ErrorCode.INVALID_CONFIG and "NOISY" in (result.error_message or "")
    assert LEVELS.level("pybroker.connection") == "INFO"
    for configs, code in ((("pybroker.nope", SET, "DEBUG"), ErrorCode.INVALID_CONFIG),
                          (("root", DELETE, None), ErrorCode.INVALID_REQUEST),
                          (("root", APPEND, "DEBUG"), ErrorCode.INVALID_REQUEST),
                          (("root", SUBTRACT, "DEBUG"), ErrorCode.INVALID_REQUEST),
                          (("root", 9, "DEBUG"), ErrorCode.INVALID_REQUEST)):
        assert (await _alter(client, node, configs)).error_code == code
    assert (await _alter(client, node, ("root", SET, "ERROR"), validate_only=True)).error_code == ErrorCode.NONE
    assert LEVELS.level("root") == "INFO"


@pytest.mark.parametrize("name", ["", "x", "99"])
async def test_another_brokers_loggers_are_an_invalid_request(client: RawClient, name: str) -> None:
    assert (await _alter(client, name, ("root", SET, "DEBUG"))).error_code == ErrorCode.INVALID_REQUEST
    described = await _describe(client, name)
    assert described.error_code == ErrorCode.INVALID_REQUEST and described.error_message


def test_setting_root_changes_the_stdlib_root_until_reset() -> None:
    import logging

    before = logging.getLogger().level
    LEVELS.set("root", "FATAL")
    assert logging.getLogger().level == logging.CRITICAL
    LEVELS.reset("INFO")
    assert logging.getLogger().level == before
