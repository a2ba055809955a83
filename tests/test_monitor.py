import subprocess
import sys
import time

from serverlab.monitor import Monitor

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


def test_samples_the_whole_tree_ten_times_a_second():
    proc = start_tree()
    try:
        with Monitor(proc.pid) as mon:
            time.sleep(1.5)
    finally:
        proc.kill()
        proc.wait()
    assert 10 <= len(mon.samples) <= 17
    late = mon.samples[3:]
    busy = sum(s.cpu_percent for s in late) / len(late)
    assert busy > 50, f"the busy child's CPU was not counted: {busy:.0f}%"
    assert all(s.processes == 2 for s in late)
    assert mon.peak("rss_bytes") > 150 * 1024 * 1024
    assert all(s.threads >= 2 and s.fds >= 3 for s in late)
    assert all(s.engine_cpu_percent is None for s in mon.samples)


def test_engine_cpu_is_reported_once_watched():
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    engine = subprocess.Popen(
        [sys.executable, "-c", "import time\nend=time.time()+30\nwhile time.time()<end: pass"]
    )
    try:
        with Monitor(server.pid) as mon:
            mon.watch_engine(engine.pid)
            time.sleep(1.2)
    finally:
        for p in (server, engine):
            p.kill()
            p.wait()
    engine_readings = [s.engine_cpu_percent for s in mon.samples[3:]]
    assert all(r is not None for r in engine_readings)
    assert sum(engine_readings) / len(engine_readings) > 50
    idle = sum(s.cpu_percent for s in mon.samples[3:]) / len(mon.samples[3:])
    assert idle < 20


def test_a_server_that_dies_mid_run_leaves_empty_samples_not_an_error():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    with Monitor(proc.pid) as mon:
        time.sleep(0.8)
    proc.wait()
    assert mon.samples[-1].processes == 0
    assert mon.samples[-1].rss_bytes == 0
