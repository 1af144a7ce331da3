"""The plan: interleaved (or reproducibly random) order, warm-up that settles."""

from support import PORT_VS_SOCKET as EXPERIMENT

from servelab.measuring.plan import plan_launches


def test_plan_is_interleaved_and_random_order_is_reproducible():
    plan = plan_launches(EXPERIMENT)
    assert [(p.repetition, p.stack.name) for p in plan] == [
        (1, "tcp"),
        (1, "unix"),
        (2, "tcp"),
        (2, "unix"),
        (3, "tcp"),
        (3, "unix"),
    ]
    shuffled = EXPERIMENT.model_copy(update={"order": "random", "order_seed": 7})
    first, second = plan_launches(shuffled), plan_launches(shuffled)
    assert first == second
    assert sorted((p.repetition, p.stack.name) for p in first) == sorted(
        (p.repetition, p.stack.name) for p in plan
    )


def test_warmup_settles_when_two_rounds_agree():
    from servelab.measuring.plan import warmup_settled

    assert not warmup_settled([], 5.0)
    assert not warmup_settled([900.0], 5.0)
    assert not warmup_settled([600.0, 900.0], 5.0)  # still climbing: +50 %
    assert warmup_settled([600.0, 900.0, 930.0], 5.0)  # +3.3 %
    assert not warmup_settled([900.0, 1000.0], 5.0)  # exactly +11 %
    assert not warmup_settled([0.0, 0.0], 5.0)
