"""A real nginx in front of a real appliance: started with the configuration
``appliance proxy-config nginx --standalone`` prints, under a temporary prefix."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.harness import free_port, run_cli, wait_for

PUBLIC = "sms.test"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")
needs_nginx = pytest.mark.skipif(
    not NGINX, reason="nginx is not installed (Debian package `nginx`; .ci/run installs it)")


def printed_config(config: Path, *args: str) -> str:
    """What ``appliance proxy-config`` prints for ``config``."""
    return run_cli("proxy-config", *args, "--config", str(config)).stdout


class Nginx:
    """``nginx -c FILE -p PREFIX`` in the foreground, listening on a free port."""

    def __init__(self, prefix: Path, conf_text: str, port: int) -> None:
        self.prefix = prefix
        self.port = port
        (prefix / "logs").mkdir(parents=True, exist_ok=True)
        self.conf = prefix / "nginx.conf"
        self.conf.write_text(conf_text)
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def printed(cls, prefix: Path, config: Path, *args: str) -> Nginx:
        port = free_port()
        text = printed_config(config, "nginx", "--standalone",
                              "--listen", f"127.0.0.1:{port}", *args)
        return cls(prefix, text, port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Nginx:
        self.proc = subprocess.Popen(
            [NGINX, "-c", str(self.conf), "-p", f"{self.prefix}/",
             "-e", str(self.prefix / "logs" / "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def listening() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"nginx exited with {self.proc.returncode}: {err}"
                                     f"{self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_for(listening, 15, message="nginx to listen")
        return self

    def access_log(self) -> str:
        path = self.prefix / "logs" / "access.log"
        return path.read_text() if path.exists() else ""

    def error_log(self) -> str:
        path = self.prefix / "logs" / "error.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", f"/CN={PUBLIC}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key
