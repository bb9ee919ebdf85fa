"""What every kind of test data shares: tags, the owner and tags fields, and the abstract
`GymData` each kind's model extends (see `catalog` for the lists and search over them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.urls import reverse

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models.fields.related_descriptors import ManyRelatedManager


class Tag(models.Model):
    """A label such as a phenomenon or circuit ("agreement", "garden-path")."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("suites:tag", args=[self.name])


def owner_field(related_name: str) -> models.ForeignKey[User | None, User | None]:
    """The owner of a suite, minimal-pair set or probing task. None: one shipped with the
    site (the examples); only staff may change those."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name=related_name,
    )


def tags_field(related_name: str) -> models.ManyToManyField:
    return models.ManyToManyField(Tag, blank=True, related_name=related_name)


class GymData(models.Model):
    """What the three kinds of test data (suites, minimal-pair sets, probing tasks) have
    alike: a unique name used in URLs, an owner, a description, tags, a content hash and
    timestamps. Each kind declares `owner = owner_field(...)` and `tags = tags_field(...)`
    with its own reverse name (user.suites, tag.pair_sets…) and `url_name`, its page."""

    url_name = ""
    # Declared by each kind (owner_field, tags_field), typed here (no value: Django sees
    # no field) for the code that handles any kind.
    owner_id: int | None
    if TYPE_CHECKING:
        tags: ManyRelatedManager[Tag, Any]

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse(self.url_name, args=[self.name])
