"""What every API view shares: a JSON parser that turns hostile bodies into 400s, and
throttles whose rates come from settings at request time (so tests and deployments can
change them without restarting anything)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, plus 400s (not 500s) for what it lets through: nesting deep
    enough to exhaust the stack, and text that cannot be stored (a lone surrogate such
    as "\\udc00", or NUL)."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("the JSON is nested too deeply") from None
        try:
            text = json.dumps(data, ensure_ascii=False)
            text.encode("utf-8")
        except RecursionError:
            raise ParseError("the JSON is nested too deeply") from None
        except UnicodeEncodeError as exc:
            raise ParseError(
                f"the JSON holds a lone surrogate (\\u{ord(exc.object[exc.start]):04x}), "
                "which is not a character; remove it"
            ) from None
        if "\\u0000" in text or "\x00" in text:
            raise ParseError("the JSON holds a NUL character (\\u0000); remove it")
        return data


class _SettingsRate:
    """Reads the rate of `scope` from settings.GYM_THROTTLE_RATES when asked."""

    scope: str

    def get_rate(self) -> str | None:
        return settings.GYM_THROTTLE_RATES.get(self.scope)


class AnonThrottle(_SettingsRate, AnonRateThrottle):
    scope = "anon"


class UserThrottle(_SettingsRate, UserRateThrottle):
    scope = "user"


class AnonValidateThrottle(_SettingsRate, AnonRateThrottle):
    """Checking a whole suite costs seconds of CPU for a large one: anonymous callers get
    a smaller allowance than for reading."""

    scope = "anon_validate"


class NameField(serializers.SlugRelatedField):
    """A row named by its name. A name with a NUL character names nothing (PostgreSQL
    cannot even compare it): 'Invalid value.' before any query."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("invalid")
        return super().to_internal_value(data)
