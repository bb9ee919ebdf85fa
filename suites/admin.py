from __future__ import annotations

from django.contrib import admin

from suites.models import Suite, Tag


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name"]


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "item_count", "condition_count", "region_count", "updated_at"]
    search_fields = ["name", "description"]
    list_filter = ["tags"]
    # Content changes go through the importer so that validation always runs.
    readonly_fields = [
        "content_hash",
        "source_format",
        "import_warnings",
        "item_count",
        "condition_count",
        "region_count",
        "metric",
        "extra_meta",
    ]
    fields = [
        "name",
        "owner",
        "description",
        "reference",
        "author",
        "comment",
        "tags",
        *readonly_fields,
    ]
