from __future__ import annotations

from django.apps import AppConfig


class SuitesConfig(AppConfig):
    name = "suites"
    verbose_name = "Test suites"
