"""The golden seeds: every (api, version) we have a codec for has one, and every one is a request we read."""

from __future__ import annotations

from pybroker.protocol.frame_codec import decode_request
from tests.fuzz.mutate import Mutator
from tests.fuzz.seeds import GENERATED, GOLDEN_DIR, advertised, codec_versions, key_of, load_seeds, seed_files


def test_every_advertised_api_version_has_a_seed() -> None:
    seeds = load_seeds()
    missing = [key for key in advertised() if key not in seeds]
    assert not missing, f"no golden seed for {missing}: run `python -m tests.fuzz.seeds`"


def test_every_codec_version_has_a_seed_for_when_its_handler_comes() -> None:
    seeds = load_seeds(all_versions=True)
    missing = [key for key in codec_versions() if key not in seeds]
    assert not missing, f"no golden seed for {missing}: run `python -m tests.fuzz.seeds`"


def test_the_campaign_is_fed_only_what_the_broker_advertises() -> None:
    assert set(load_seeds()) == set(advertised())


def test_seeds_are_requests_we_decode() -> None:
    readable = set(codec_versions())
    for path in seed_files():
        frame = path.read_bytes()
        assert key_of(frame) in readable, f"{path.name}: a version we have no codec for"
        assert path.name.startswith(f"k{key_of(frame)[0]:02d}v{key_of(frame)[1]:02d}-"), path.name
        decode_request(bytearray(frame))


def test_generated_seeds_only_where_no_client_sends_the_version() -> None:
    captured = {key_of(p.read_bytes()) for p in seed_files() if f"-{GENERATED}-" not in p.name}
    generated = {key_of(p.read_bytes()) for p in seed_files() if f"-{GENERATED}-" in p.name}
    assert not captured & generated, "stale generated seeds: run `python -m tests.fuzz.seeds`"
    assert len(captured) >= 50, "the captured frames are gone: run `python -m tests.fuzz.record_golden`"


def test_the_golden_seeds_stay_small() -> None:
    assert sum(p.stat().st_size for p in GOLDEN_DIR.iterdir()) < 1 << 20


def test_the_mutator_is_a_pure_function_of_seed_and_index() -> None:
    seeds = load_seeds()
    first, again = Mutator(seeds), Mutator(seeds)
    inputs = [first.input(11, i) for i in range(300)]
    assert inputs == [again.input(11, i) for i in range(300)]
    assert len({i.data for i in inputs}) > 250
