"""The container engine the container tests drive: Docker where a Docker engine answers, podman
otherwise, and compose on top of it (``docker compose`` or ``docker-compose``; ``podman-compose``).

Podman here is rootful podman 4.3 from Debian bookworm on a machine without systemd and without
Docker Hub, so (docs/docker.md, "Without Docker"):

- the base image standing in for ``python:3.11-slim-bookworm`` is made from Debian's archive
  (tools/containers/python-base.sh) and imported; its tarball is cached under
  ~/.cache/kbroker/images so a warm run does not download Debian again;
- tools/containers/containers.conf sets the ulimits root may set, runc and cgroupfs;
- BUILDAH_FORMAT=docker, or podman drops the Dockerfile's HEALTHCHECK;
- podman 4.3 runs no healthcheck timers without systemd and podman-compose 1.0 ignores
  ``condition: service_healthy``, so ``wait_healthy`` runs the healthcheck itself until it passes,
  and the one-shot services are run in order by the caller;
- podman-compose 1.0 ``run`` exits 0 whatever its container did, so ``run_service`` names the
  container and reads its exit code.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field

from tests.support import ROOT

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                     "kbroker", "images")
BASE_SCRIPT = os.path.join(ROOT, "tools", "containers", "python-base.sh")
CONTAINERS_CONF = os.path.join(ROOT, "tools", "containers", "containers.conf")
EXTRA_CA_DIR = "/usr/local/share/ca-certificates"
# a base older than this is made again, so Debian's security updates reach the image
BASE_MAX_AGE_S = 7 * 24 * 3600
BROKER_IMAGE = "kbroker:dev"
TESTS_IMAGE = "kbroker-compose-tests:dev"


class EngineMissing(AssertionError):
    """No container engine: the container tests fail (tools/install-test-deps.sh installs one)."""


def run(argv: list[str], *, env: dict | None = None, timeout: float = 600, check: bool = True,
        input: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {result.returncode}\n"
                             f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n"
                             f"{result.stderr[-4000:]}")
    return result


@dataclass
class Engine:
    name: str                  # "docker" or "podman"
    cli: str                   # the engine's executable
    compose: list[str]         # the compose command
    env: dict = field(default_factory=lambda: dict(os.environ))

    def __call__(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return run([self.cli, *args], env=self.env, **kwargs)

    # -- images

    def base_image(self) -> str | None:
        """The PYTHON_IMAGE build argument: KBROKER_PYTHON_IMAGE when set; with Docker the
        Dockerfile's own (python:3.11-slim-bookworm, None here); with podman one made from
        Debian's archive."""
        if os.environ.get("KBROKER_PYTHON_IMAGE"):
            return os.environ["KBROKER_PYTHON_IMAGE"]
        if self.name == "docker":
            return None
        return self.debian_base()

    def debian_base(self) -> str:
        """localhost/kbroker-python-base:<key>, the key a hash of the recipe and of the extra CA
        certificates it copies in; imported from the cached tarball, made when there is none (or
        it is older than a week)."""
        digest = hashlib.sha256(open(BASE_SCRIPT, "rb").read())
        if os.path.isdir(EXTRA_CA_DIR):
            for name in sorted(os.listdir(EXTRA_CA_DIR)):
                if name.endswith(".crt"):
                    digest.update(open(os.path.join(EXTRA_CA_DIR, name), "rb").read())
        key = digest.hexdigest()[:12]
        tag = f"localhost/kbroker-python-base:{key}"
        tarball = os.path.join(CACHE, f"python-base-{key}.tar")
        fresh = os.path.exists(tarball) and time.time() - os.path.getmtime(tarball) < BASE_MAX_AGE_S
        if fresh and self("image", "exists", tag, check=False).returncode == 0:
            return tag
        if not fresh:
            os.makedirs(CACHE, exist_ok=True)
            partial = f"{tarball}.{os.getpid()}.partial"
            with open(partial, "wb") as out:
                made = subprocess.run(["bash", BASE_SCRIPT], stdout=out, stderr=subprocess.PIPE,
                                      text=True, timeout=900)
            if made.returncode != 0:
                os.unlink(partial)
                raise AssertionError(f"{BASE_SCRIPT} failed:\n{made.stderr[-4000:]}")
            os.replace(partial, tarball)
            for old in os.listdir(CACHE):
                if old.startswith("python-base-") and old != os.path.basename(tarball):
                    os.unlink(os.path.join(CACHE, old))
        self("import", "--change", 'CMD ["python3"]', tarball, tag)
        return tag

    def build(self, target: str, tag: str, base: str | None) -> None:
        args = ["build", "--target", target, "-t", tag]
        if base:
            args += ["--build-arg", f"PYTHON_IMAGE={base}"]
        self(*args, ".", timeout=900)

    def image_size(self, tag: str) -> int:
        return int(self("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())

    # -- containers

    def healthcheck(self, container: str) -> tuple[bool, str]:
        """Runs the container's healthcheck once, now: (passed, what it said). Podman has
        `healthcheck run`; Docker runs it only on its interval, so its command is exec'd."""
        if self.name == "podman":
            ran = self("healthcheck", "run", container, check=False, timeout=60)
            result = self("inspect", "--format", "{{json .State.Health}}", container,
                          check=False)
            health = json.loads(result.stdout or "null") or {} if result.returncode == 0 else {}
            said = (health.get("Log") or [{}])[-1].get("Output", "").strip()  # the check's own
            return ran.returncode == 0, said or (ran.stdout + ran.stderr).strip()
        test = json.loads(self("inspect", "--format", "{{json .Config.Healthcheck.Test}}",
                               container).stdout)
        command = test[1:] if test[0] == "CMD" else ["sh", "-c", test[1]]
        ran = self("exec", container, *command, check=False, timeout=60)
        return ran.returncode == 0, (ran.stdout + ran.stderr).strip()

    def exit_code(self, container: str) -> int:
        return int(self("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip())

    def logs(self, container: str) -> str:
        result = self("logs", container, check=False)
        return result.stdout + result.stderr


def detect() -> Engine:
    """Docker when `docker info` reaches an engine, else podman; KBROKER_CONTAINER_ENGINE=docker
    or podman insists on one. Neither: EngineMissing, so the tests fail rather than skip."""
    wanted = os.environ.get("KBROKER_CONTAINER_ENGINE", "")
    docker = shutil.which("docker")
    if wanted in ("", "docker") and docker:
        if run([docker, "info"], check=False, timeout=60).returncode == 0:
            if run([docker, "compose", "version"], check=False).returncode == 0:
                compose = [docker, "compose"]
            elif shutil.which("docker-compose"):
                compose = [shutil.which("docker-compose")]
            else:
                raise EngineMissing("a Docker engine but no docker compose nor docker-compose")
            return Engine("docker", docker, compose)
        if wanted == "docker":
            raise EngineMissing("KBROKER_CONTAINER_ENGINE=docker but `docker info` fails")
    podman, podman_compose = shutil.which("podman"), shutil.which("podman-compose")
    if podman and podman_compose:
        env = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF, BUILDAH_FORMAT="docker")
        return Engine("podman", podman, [podman_compose], env)
    raise EngineMissing("no container engine: no Docker engine answers `docker info` and podman "
                        "or podman-compose is not installed; run tools/install-test-deps.sh")


class Stack:
    """One compose project (its own name, so its containers and volume are its own) of
    docker-compose.yml and the given extra files; the host ports are chosen by the caller
    (KBROKER_PORT, KBROKER_HTTP_PORT in docker-compose.yml)."""

    def __init__(self, engine: Engine, files: list[str], *, port: int, http_port: int) -> None:
        self.engine = engine
        self.project = f"kbroker-ci-{uuid.uuid4().hex[:8]}"
        self.files = files
        self.port, self.http_port = port, http_port
        self.env = dict(engine.env, KBROKER_PORT=str(port), KBROKER_HTTP_PORT=str(http_port))

    def compose(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        files = [a for f in self.files for a in ("-f", f)]
        return run([*self.engine.compose, "-p", self.project, *files, *args], env=self.env,
                   **kwargs)

    def container(self, service: str) -> str:
        """The container compose made for a service (the first one)."""
        if self.engine.name == "podman":
            return f"{self.project}_{service}_1"
        ids = self.compose("ps", "-q", service).stdout.split()
        assert ids, f"no container for {service}"
        return ids[0]

    def up(self, service: str = "broker") -> float:
        """Starts the service (not building: the images are built already) and waits until its
        healthcheck passes; the seconds from `up` to healthy."""
        started = time.monotonic()
        self.compose("up", "-d", "--no-build", service)
        return self.wait_healthy(service, started)

    def start(self, service: str = "broker") -> float:
        started = time.monotonic()
        self.compose("start", service)
        return self.wait_healthy(service, started)

    def wait_healthy(self, service: str, started: float, timeout: float = 90) -> float:
        container = self.container(service)
        last = ""
        while time.monotonic() - started < timeout:
            healthy, last = self.engine.healthcheck(container)
            if healthy:
                return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"{service} not healthy after {timeout}s ({last})\n"
                             + self.engine.logs(container)[-4000:])

    def run_service(self, service: str, timeout: float = 600) -> tuple[int, str]:
        """Runs a one-shot service (its dependencies are up already) to its end: (exit code, its
        output)."""
        name = f"{self.project}-{service}-{uuid.uuid4().hex[:6]}"
        result = self.compose("run", "--no-deps", "--name", name, "-T", service,
                              check=False, timeout=timeout)
        try:
            code = self.engine.exit_code(name)
            output = self.engine.logs(name)
        except AssertionError:
            return result.returncode or 1, result.stdout + result.stderr
        finally:
            self.engine("rm", "-f", "-v", name, check=False)  # -v: its anonymous volume too
        return code, output

    def stop(self, service: str = "broker") -> None:
        self.compose("stop", service)

    def down(self, volumes: bool = False) -> None:
        """`down` (the volume kept), or `down -v` (volume dropped; with podman-compose 1.0 also
        the project's network, which it leaves behind)."""
        self.compose("down", *(["-v"] if volumes else []), "-t", "30", timeout=300)
        if volumes and self.engine.name == "podman":
            self.engine("network", "rm", "-f", f"{self.project}_default", check=False)


def suite_size() -> int:
    """How many tests tests/compose holds: every one must pass in the tests service."""
    folder = os.path.join(ROOT, "tests", "compose")
    return sum(open(os.path.join(folder, name)).read().count("\ndef test_")
               for name in os.listdir(folder) if name.startswith("test_"))


def assert_suite_passed(code: int, output: str) -> None:
    assert code == 0, output[-6000:]
    tail = output.strip().splitlines()[-1]
    assert re.match(rf"{suite_size()} passed\b", tail) and "skipped" not in tail, tail
