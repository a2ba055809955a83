import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from serverlab.run.execution import procfs
from serverlab.run.execution.monitor import Monitor, _TreeClock, next_tick

# A parent that forks one busy child and holds 150 MB itself: a tree like a
# multi-process server, with CPU spent outside the root process.
TREE = """
import os, sys, time
block = bytearray(150 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
if os.fork() == 0:
    end = time.time() + 30
    while time.time() < end:
        pass
    os._exit(0)
print("ready", flush=True)
time.sleep(30)
"""


def start_tree():
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def tree_cpu_seconds(pid: int) -> float:
    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])


def integrated_cpu_seconds(samples, field: str) -> float:
    """The CPU time the samples account for: percent x the time each one covers. A sample
    without a value (the monitor reads a costly tree's CPU every few samples only) covers
    nothing; the next valued sample's percent covers the time since the last value."""
    total, previous_t = 0.0, 0.0
    for sample in samples:
        value = getattr(sample, field)
        if value is not None:
            total += value / 100 * (sample.t - previous_t)
            previous_t = sample.t
    return total


def spend(pid: int, before: float, cpu_s: float = 0.3, least_s: float = 1.5) -> float:
    """Waits at least `least_s`, and until the tree has used `cpu_s` of CPU since `before`
    (up to 30 s): on a machine other work keeps busy the busy loop gets a share only.
    The CPU it used."""
    start = time.monotonic()
    while True:
        time.sleep(0.1)
        used = tree_cpu_seconds(pid) - before
        waited = time.monotonic() - start
        if (waited >= least_s and used >= cpu_s) or waited > 30:
            return used


# The monitor's figures must add up to the CPU the processes really used. Comparing with
# the kernel's own accounting, rather than with "a busy loop uses a core", holds however
# busy the machine is.
def test_samples_the_whole_tree_ten_times_a_second():
    proc = start_tree()
    try:
        before = tree_cpu_seconds(proc.pid)
        start = time.monotonic()
        with Monitor(proc.pid) as mon:
            spend(proc.pid, before)
        watched = time.monotonic() - start
        used = tree_cpu_seconds(proc.pid) - before
    finally:
        proc.kill()
        proc.wait()
    assert 6.7 <= len(mon.samples) / watched <= 11.4, "ten samples a second"
    assert used > 0.1, "the busy child did not run at all"
    counted = integrated_cpu_seconds(mon.samples, "cpu_percent")
    assert counted == pytest.approx(used, rel=0.25, abs=0.12), "the child's CPU was not counted"
    late = mon.samples[3:]
    assert all(s.processes == 2 for s in late)
    assert max(s.rss_bytes for s in mon.samples if s.rss_bytes) > 150 * 1024 * 1024
    assert all(s.threads >= 2 and s.fds >= 3 for s in late)
    assert all(s.engine_cpu_percent is None for s in mon.samples)


def test_engine_cpu_is_reported_once_watched():
    # The idle server says when its interpreter has started: on a busy machine Python's own
    # start-up takes tens of ms of CPU, which is not idleness the check may count.
    server = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    assert server.stdout.readline() == b"up\n"
    engine = subprocess.Popen(
        [sys.executable, "-c", "import time\nend=time.time()+30\nwhile time.time()<end: pass"]
    )
    try:
        with Monitor(server.pid) as mon:
            mon.watch_engine(engine.pid)
            used = spend(engine.pid, tree_cpu_seconds(engine.pid), least_s=1.2)
    finally:
        for p in (server, engine):
            p.kill()
            p.wait()
        server.stdout.close()
    assert all(s.engine_cpu_percent is not None for s in mon.samples[1:])
    counted = integrated_cpu_seconds(mon.samples[1:], "engine_cpu_percent")
    assert used > 0.1
    assert counted == pytest.approx(used, rel=0.25, abs=0.12)
    assert integrated_cpu_seconds(mon.samples, "cpu_percent") < 0.05, "the idle server"


def test_a_server_that_dies_mid_run_leaves_empty_samples_not_an_error():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    with Monitor(proc.pid) as mon:
        # Samples after the end, however long the interpreter took to start on a busy machine.
        proc.wait()
        time.sleep(0.5)
    assert mon.samples[-1].processes == 0
    assert mon.samples[-1].rss_bytes == 0


def test_a_sampler_woken_late_skips_the_instants_it_missed_instead_of_sampling_back_to_back():
    on_time = [next_tick(0.0, 0.1, now) for now in (0.1003, 0.2004, 0.3001)]
    assert on_time == pytest.approx([0.2, 0.3, 0.4])
    # Woken at 0.318 for the 0.1 instant: the next sample is at 0.4, not at once for 0.2.
    assert next_tick(0.0, 0.1, 0.318) == pytest.approx(0.4)
    # Whenever it wakes, the next sample is half an interval to an interval and a half away.
    for now in (0.0, 0.049, 0.05, 0.0999, 0.1499, 0.15, 7.3456):
        gap = next_tick(0.0, 0.1, now) - now
        assert 0.05 < gap <= 0.15 + 1e-9, now


# A server holding a listener and three accepted connections it never reads: four sockets
# on its port, the clients' bytes in their receive queues.
HOLDER = """
import socket, time
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
held = [listener.accept()[0] for _ in range(3)]
time.sleep(30)
"""


@contextlib.contextmanager
def socket_holder():
    """The HOLDER server with its three connections made, each sent 64 KiB; yields (pid,
    port)."""
    server = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    clients = []
    try:
        port = int(server.stdout.readline())
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        for client in clients:
            client.sendall(bytes(64 * 1024))
        yield server.pid, port
    finally:
        for client in clients:
            client.close()
        server.kill()
        server.wait()
        server.stdout.close()


def starve_the_sampler(monitor: Monitor, seconds: float) -> int:
    """Keeps the interpreter's lock for `seconds`: the sampler thread, woken on time, cannot
    run meanwhile, as a sampler the machine's load keeps off its CPU. A switch interval
    longer than that, and a loop that never blocks, so the lock is never handed over.
    Returns how many samples the sampler still added meanwhile (0 when it was starved)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(60)
    try:
        before = len(monitor.samples)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return len(monitor.samples) - before
    finally:
        sys.setswitchinterval(switch)


def test_a_load_window_the_sampler_is_starved_through_still_has_a_socket_memory_reading():
    with socket_holder() as (pid, port), Monitor(pid, port=port) as monitor:
        time.sleep(0.3)
        monitor.open_window()
        # Samples may slip in while open_window and close_window read /proc (more on a
        # loaded machine), but none reads the sockets: the reading is due 0.5 s in.
        added = starve_the_sampler(monitor, 1.0)
        figures = monitor.close_window()
    assert added == 0, "the sampler was not starved"
    last = figures["sockets"]["last"]
    assert (last["sockets"], last["established"]) == (4, 3)
    assert last["kernel_bytes"] >= 3 * 64 * 1024, "the unread bytes of the connections"
    # Read at the close, after the engine's stop would be: the reading says so.
    assert last["after_engine_stop"] is True


def test_a_sampler_starved_for_most_of_a_short_window_reads_the_sockets_itself():
    with socket_holder() as (pid, port), Monitor(pid, port=port) as monitor:
        time.sleep(0.3)
        before = len(monitor.samples)
        monitor.open_window()
        added = starve_the_sampler(monitor, 0.7)
        time.sleep(0.4)
        figures = monitor.close_window()
        in_window = monitor.samples[before:]
    assert added == 0, "the sampler was not starved"
    last = figures["sockets"]["last"]
    assert (last["sockets"], last["established"]) == (4, 3)
    assert "after_engine_stop" not in last, "read by the sampler, inside the window"
    assert last["t"] >= in_window[0].t


def test_a_few_costly_cpu_readings_thin_nothing_and_costly_readings_thin_by_the_fifth():
    clock = _TreeClock(os.getpid())
    # A light server's readings, four of them slowed by the machine or the interpreter's lock.
    for cost in (2e-5, 2e-5, 1e-3, 5e-4, 2e-4, 4e-4, 2e-5, 3e-5):
        clock._budget(cost)
        assert clock.cpu_every == 1, cost
    # A server whose thread walks cost 0.3 ms every time.
    walks = []
    for _ in range(5):
        clock._budget(3e-4)
        walks.append(clock.cpu_every)
    assert walks == [1, 1, 1, 1, 3]


def test_reading_a_cpu_clock_lets_no_other_thread_of_the_runner_run():
    # The runner's other threads (the engine's readers, the executor) want the interpreter's
    # lock while the monitor samples. A CPU reading that let go of it (a ctypes call) cost
    # the monitor's thread 0.3-0.8 ms a sample in a run, which thinned the series. A thread
    # that asks for the lock all the time ran inside 5 to 33 of 1000 such readings.
    ran, busy = [0], [True]

    def ask_for_the_lock():
        while busy[0]:
            ran[0] += 1
            time.sleep(0)

    other = threading.Thread(target=ask_for_the_lock, daemon=True)
    other.start()
    let_run = 0
    try:
        for _ in range(1000):
            before = ran[0]
            assert procfs.cpu_seconds(os.getpid()) is not None
            let_run += ran[0] != before
    finally:
        busy[0] = False
        other.join()
    # Not 0: every switch interval (5 ms) the interpreter itself hands the lock over once.
    assert let_run <= 2, f"the other thread ran during {let_run} readings of 1000"
