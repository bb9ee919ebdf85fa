"""Accounts: sign-up, and log-in with a limit on failed attempts, for the log-in page and
the API's token endpoint alike: past GYM_LOGIN_MAX_FAILURES failures for one account
from one address (or five times that from one address) within GYM_LOGIN_WINDOW_SECONDS,
every attempt is refused, right password or not, until the window ends."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rest_framework import exceptions
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.settings import api_settings

# An address may try several accounts (a lab behind one NAT): it gets this many times
# the per-account allowance.
ADDRESS_FACTOR = 5


def signed_in(user: User | AnonymousUser) -> User:
    """The user of a request that only signed-in users reach (behind `login_required` or
    `IsAuthenticated`), typed as the user who owns what the request makes."""
    if not isinstance(user, User):
        raise PermissionDenied
    return user


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False, help_text="Optional; only used to reach you.")

    class Meta:
        model = User
        fields = ("username", "email")


def signup(request: HttpRequest) -> HttpResponse:
    """The sign-up page: a new account, logged in at once, lands on the suites."""
    if request.method == "POST":
        form = SignupForm(request.POST)
        if form.is_valid():
            user = form.save()
            login(request, user)
            messages.success(request, f"Welcome, {user.username}. You can upload suites now.")
            return redirect("suites:list")
    else:
        form = SignupForm()
    return render(request, "registration/signup.html", {"form": form})


def _keys(username: str, address: str) -> list[tuple[str, int]]:
    limit = settings.GYM_LOGIN_MAX_FAILURES
    # Hashed: usernames may hold characters a cache key may not.
    account = hashlib.sha256(f"{username.casefold()}|{address}".encode()).hexdigest()
    return [
        (f"login-failures:account:{account}", limit),
        (f"login-failures:address:{address}", limit * ADDRESS_FACTOR),
    ]


def login_wait_seconds(*, username: str, address: str) -> int:
    """Seconds until log-in may be tried again; 0 when it may be tried now."""
    now = time.time()
    waits = []
    for key, limit in _keys(username, address):
        entry = cache.get(key)
        if entry and entry["count"] >= limit:
            waits.append(int(entry["until"] - now) + 1)
    return max([w for w in waits if w > 0], default=0)


def login_failure_record(*, username: str, address: str) -> None:
    window = settings.GYM_LOGIN_WINDOW_SECONDS
    for key, _limit in _keys(username, address):
        entry = cache.get(key) or {"count": 0, "until": time.time() + window}
        entry["count"] += 1
        cache.set(key, entry, timeout=max(1, int(entry["until"] - time.time()) + 1))


def _address(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") if request is not None else None) or "unknown"


def _wait_message(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    return (
        "Too many failed log-in attempts for this account from your address. "
        f"Try again in about {minutes} minute{'s' if minutes != 1 else ''}."
    )


class _LimitedLogin(AuthenticationForm):
    """Mixed into Django's log-in forms (site and admin)."""

    request: HttpRequest | None
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        address = _address(self.request)
        wait = login_wait_seconds(username=username, address=address)
        if wait:
            raise forms.ValidationError(_wait_message(wait), code="too_many_attempts")
        try:
            return super().clean()
        except forms.ValidationError:
            if username:
                login_failure_record(username=username, address=address)
            raise


class LimitedAuthenticationForm(_LimitedLogin, AuthenticationForm):
    pass


class LimitedAdminAuthenticationForm(_LimitedLogin, AdminAuthenticationForm):
    pass


class LoginView(auth_views.LoginView):
    form_class = LimitedAuthenticationForm


class LimitedAuthTokenSerializer(AuthTokenSerializer):
    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        username = str(attrs.get("username") or "")
        address = _address(self.context.get("request"))
        wait = login_wait_seconds(username=username, address=address)
        if wait:
            raise exceptions.Throttled(wait=wait, detail=_wait_message(wait))
        try:
            return super().validate(attrs)
        except exceptions.ValidationError:
            login_failure_record(username=username, address=address)
            raise


class ObtainTokenView(ObtainAuthToken):
    """POST username and password; answers {"token": "..."}."""

    serializer_class = LimitedAuthTokenSerializer
    # DRF's token view names its own parsers; the site's JSON parser refuses hostile JSON.
    # The stubs type the setting as dotted paths; api_settings imports them as classes.
    parser_classes = api_settings.DEFAULT_PARSER_CLASSES  # type: ignore[assignment]
