"""Safe defaults: DEBUG off, a secret key generated once per installation, published keys
refused, `check --deploy` clean behind GYM_HTTPS, and friendly error pages that reveal
nothing about the site's code or URLs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from django.http import HttpRequest, HttpResponse
from django.urls import path

from gym.urls import urlpatterns as site_urlpatterns
from tests.conftest import REPO, manage

# Settings are read once per process: each case starts a fresh one with its environment.
_CLEARED = (
    "DEBUG",
    "SECRET_KEY",
    "GYM_CACHE_URL",
    "GYM_HTTPS",
    "ALLOWED_HOSTS",
    "GYM_VAR_DIR",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    # Set by the browser tests' fixtures; a deployment never has it.
    "DJANGO_ALLOW_ASYNC_UNSAFE",
)


def _manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    environ |= {"GYM_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "gym.settings"}
    environ |= env
    return manage(environ, *args, timeout=120)


def _setting(tmp_path: Path, name: str, **env: str) -> str:
    done = _manage(
        tmp_path,
        "shell",
        "-c",
        f"from django.conf import settings; print(repr(settings.{name}))",
        **env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_debug_is_off_and_a_key_is_generated_once(tmp_path: Path) -> None:
    assert _setting(tmp_path, "DEBUG") == "False"
    key_file = tmp_path / "var" / "secret_key"
    key = key_file.read_text().strip()
    assert len(key) >= 50
    # Only the owner may read it.
    assert key_file.stat().st_mode & 0o077 == 0
    # A second start uses the same key: sessions survive a restart.
    assert _setting(tmp_path, "SECRET_KEY") == repr(key)
    other = tmp_path / "other"
    assert _setting(other, "SECRET_KEY") != repr(key)


@pytest.mark.parametrize(
    "key", ["gym-insecure-development-key-change-me-in-production", "change-me-before-you-deploy"]
)
def test_published_keys_are_refused_when_debug_is_off(tmp_path: Path, key: str) -> None:
    done = _manage(tmp_path, "check", DEBUG="0", SECRET_KEY=key)
    assert done.returncode != 0
    assert "SECRET_KEY is a published placeholder" in done.stderr


def test_compose_default_key_is_refused_too(tmp_path: Path) -> None:
    compose = (REPO / "docker-compose.yml").read_text()
    # compose insists on a key of the deployer's own instead of shipping one.
    assert "SECRET_KEY: ${SECRET_KEY:?" in compose


def test_check_deploy_is_clean_behind_https(tmp_path: Path) -> None:
    done = _manage(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        GYM_HTTPS="1",
        ALLOWED_HOSTS="gym.example.org",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout
    # Without it the same command names what is missing.
    plain = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert plain.returncode != 0
    assert "SESSION_COOKIE_SECURE" in plain.stderr + plain.stdout


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret detail /srv/gym/var/db.sqlite3 SECRET_KEY")


urlpatterns = [path("boom/", _boom), *site_urlpatterns]


@pytest.mark.django_db
def test_unknown_address_gets_the_friendly_404_without_the_url_list(anon_client) -> None:
    response = anon_client.get("/no/such/page/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "There is nothing at this address." in text
    assert "Resolver404" not in text
    assert "api/schema" not in text  # no list of URL patterns
    missing = anon_client.get("/suites/no-such-suite/")
    assert missing.status_code == 404
    assert "No suite named" in missing.content.decode()


@pytest.mark.django_db
def test_server_error_gets_the_friendly_500_without_details(settings) -> None:
    from django.test import Client

    settings.ROOT_URLCONF = __name__
    client = Client(raise_request_exception=False)
    response = client.get("/boom/")
    assert response.status_code == 500
    text = response.content.decode()
    assert "Something went wrong" in text
    assert "/srv/gym" not in text and "SECRET_KEY" not in text and "Traceback" not in text


@pytest.mark.django_db
def test_static_files_are_served_with_debug_off(anon_client) -> None:
    from django.conf import settings

    assert settings.DEBUG is False
    response = anon_client.get("/static/css/gym.css")
    assert response.status_code == 200
    # Every page names its icon, so browsers do not ask for a /favicon.ico that 404s.
    page = anon_client.get("/").content.decode()
    icon = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
    assert icon, "no icon link on the home page"
    served = anon_client.get(icon.group(1))
    assert served.status_code == 200 and b"<svg" in b"".join(served.streaming_content)


def test_a_file_cache_url_gives_processes_one_shared_cache(tmp_path: Path) -> None:
    """scripts/run.sh points the web server and its workers at one folder: what one
    process puts in the cache (a warmed analysis, a log-in failure count), another reads."""
    folder = tmp_path / "cache"
    url = f"file://{folder}"
    put = _manage(
        tmp_path,
        "shell",
        "-c",
        "from django.core.cache import cache; cache.set('shared', {'n': 41}, 60)",
        GYM_CACHE_URL=url,
    )
    assert put.returncode == 0, put.stderr
    read = _manage(
        tmp_path,
        "shell",
        "-c",
        "from django.core.cache import cache; print(cache.get('shared'))",
        GYM_CACHE_URL=url,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip().splitlines()[-1] == "{'n': 41}"
    # Without the setting each process has its own cache.
    alone = _manage(
        tmp_path, "shell", "-c", "from django.core.cache import cache; print(cache.get('shared'))"
    )
    assert alone.stdout.strip().splitlines()[-1] == "None"
