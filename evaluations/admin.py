from __future__ import annotations

from django.contrib import admin

from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    list_display = [
        "display_name",
        "name",
        "source",
        "kind",
        "parameter_count",
        "is_baseline",
        "is_hidden",
    ]
    list_editable = ["is_hidden"]
    search_fields = ["name", "display_name", "source"]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "model",
        "suite",
        "status",
        "accuracy",
        "progress_done",
        "progress_total",
        "created_at",
    ]
    list_filter = ["status", "model"]
    readonly_fields = [f.name for f in Evaluation._meta.fields if f.name != "id"]


@admin.register(ProbingRun)
class ProbingRunAdmin(admin.ModelAdmin):
    list_display = ["id", "model", "task", "pooling", "probe", "status", "best_layer", "best_te"]
    list_filter = ["status", "pooling", "probe", "model"]
    readonly_fields = [f.name for f in ProbingRun._meta.fields if f.name != "id"]


@admin.register(PairEvaluation)
class PairEvaluationAdmin(admin.ModelAdmin):
    list_display = ["id", "model", "pair_set", "origin", "status", "accuracy", "ties", "created_at"]
    list_filter = ["status", "origin", "model"]
    readonly_fields = [f.name for f in PairEvaluation._meta.fields if f.name != "id"]
