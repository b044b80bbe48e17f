"""Child processes the project starts: databases, servers, nginx."""
import signal
import subprocess


def terminate(process, timeout):
    """SIGTERM, then SIGKILL after `timeout` seconds; no-op if it has
    exited. Returns the exit code."""
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return None if process is None else process.returncode
