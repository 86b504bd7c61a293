"""The streams task assignor's promises, for any tasks, members, processes and previous ownership."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pybroker.broker.streams_groups.assignor import MemberSpec, Target, assign, task_set

subtopologies = st.dictionaries(st.sampled_from(["0", "1", "2", "3"]), st.integers(0, 12), max_size=4)
Group = tuple[dict[str, int], dict[str, MemberSpec], int, frozenset[str]]


@st.composite
def groups(draw: st.DrawFn) -> Group:
    tasks = draw(subtopologies)
    member_ids = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=7, unique=True))
    processes = draw(st.lists(st.sampled_from(["p1", "p2", "p3", "p4"]), min_size=len(member_ids),
                              max_size=len(member_ids)))
    all_tasks = [(s, p) for s, n in tasks.items() for p in range(n + 2)]  # some no longer exist
    members = {}
    for member_id, process in zip(member_ids, processes, strict=True):
        owned = draw(st.lists(st.sampled_from(all_tasks), max_size=6)) if all_tasks else []
        active: dict[str, set[int]] = {}
        for s, p in owned:
            active.setdefault(s, set()).add(p)
        members[member_id] = MemberSpec(process, {s: frozenset(p) for s, p in active.items()})
    stateful = frozenset(draw(st.sets(st.sampled_from(sorted(tasks) or ["0"]))))
    return tasks, members, draw(st.integers(0, 3)), stateful


@given(groups())
def test_every_task_is_active_once_balanced_and_standbys_sit_on_other_processes(group: Group) -> None:
    tasks, members, replicas, stateful = group
    targets = assign(tasks, members, replicas, stateful)
    assert set(targets) == set(members)
    wanted = {(s, p) for s, n in tasks.items() for p in range(n)}
    actives = [t for target in targets.values() for t in task_set(target.active)]
    assert sorted(actives) == sorted(wanted)  # every task once, none that does not exist
    counts = [len(task_set(t.active)) for t in targets.values()]
    assert max(counts) - min(counts) <= 1
    owner = {t: m for m, target in targets.items() for t in task_set(target.active)}
    processes = {p.process_id for p in members.values()}
    for task in wanted:
        holders = [m for m, target in targets.items() if task in task_set(target.standby)]
        used = [members[m].process_id for m in holders] + [members[owner[task]].process_id]
        assert len(used) == len(set(used))  # no two copies of a task on one process
        if task[0] not in stateful:
            assert not holders
        else:
            assert len(holders) == min(replicas, len(processes) - 1)
    assert all(not t.warmup for t in targets.values())


@given(groups())
def test_a_member_keeps_what_it_owns_while_that_keeps_the_balance(group: Group) -> None:
    tasks, members, replicas, stateful = group
    first = assign(tasks, members, replicas, stateful)
    again = {m: MemberSpec(spec.process_id, first[m].active, first[m].standby) for m, spec in members.items()}
    assert assign(tasks, again, replicas, stateful) == first  # a stable group stays as it is
    floor = sum(tasks.values()) // len(members)
    claimed: set[tuple[str, int]] = set()
    for member_id in sorted(members):
        valid = {t for t in task_set(members[member_id].active) if t[0] in tasks and t[1] < tasks[t[0]]}
        kept = task_set(first[member_id].active) & valid
        assert len(kept) >= min(floor, len(valid - claimed))
        claimed |= valid


def test_a_new_member_takes_a_share_and_the_others_keep_theirs() -> None:
    before = assign({"0": 4}, {"a": MemberSpec("p1"), "b": MemberSpec("p2")})
    specs = {m: MemberSpec(p, before[m].active) for m, p in (("a", "p1"), ("b", "p2"))}
    specs["c"] = MemberSpec("p3")
    after = assign({"0": 4}, specs)
    assert sum(len(task_set(t.active)) for t in after.values()) == 4
    assert len(task_set(after["c"].active)) == 1
    for m in ("a", "b"):
        assert task_set(after[m].active) <= task_set(before[m].active)


def test_no_members_no_targets() -> None:
    assert assign({"0": 3}, {}) == {}
    assert assign({}, {"a": MemberSpec("p")}) == {"a": Target()}


@given(groups(), st.data())
def test_a_departed_members_stateful_task_goes_to_a_standby_of_it_while_one_has_room(group: Group,
                                                                                      data: st.DataObject) -> None:
    """What warm-up tasks are for in Kafka's design (a task moves to where its state is) without them, as in
    Kafka 4.4.0, whose assignor hands out none: when a member leaves, each stateful task it ran goes to a member
    that held its standby, unless every such member ends with at least as many active tasks as the one that
    got it (the balance came first). Nothing is ever handed out as a warm-up."""
    tasks, members, replicas, stateful = group
    first = assign(tasks, members, max(replicas, 1), stateful)
    if len(members) < 2:
        return
    gone = data.draw(st.sampled_from(sorted(members)))
    rest = {m: MemberSpec(spec.process_id, first[m].active, first[m].standby)
            for m, spec in members.items() if m != gone}
    second = assign(tasks, rest, max(replicas, 1), stateful)
    count = {m: len(task_set(t.active)) for m, t in second.items()}
    owner = {t: m for m, target in second.items() for t in task_set(target.active)}
    for task in task_set(first[gone].active):
        holders = [m for m in rest if task in task_set(rest[m].standby)]
        if task[0] in stateful and holders and owner[task] not in holders:
            assert all(count[h] >= count[owner[task]] for h in holders), (task, owner[task], holders, count)
    assert all(not t.warmup for t in second.values())
