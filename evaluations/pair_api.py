"""API: the minimal-pair analysis of a predictions TSV against a stored set.

The same function as the command line (`minimal_pairs analyze`); nothing is stored.
Lives in evaluations because suites never imports evaluations.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.minimal_pairs.analysis import (
    AnalysisError,
    AnalysisOptions,
    analyze_minimal_pairs,
    table_to_tsv,
)
from evaluations.minimal_pairs.tokens import parse_predictions_tsv
from suites import pair_sets
from suites.formats.minimal_pairs import MinimalPairFormatError
from suites.models import MinimalPairSet
from suites.pair_api import RawBodyParser


class PairSetAnalyze(APIView):
    """Analyse a predictions TSV (NLPScholar's evaluate columns, from NLPScholar itself
    or `minimal_pairs evaluate`) against the stored set; nothing is stored."""

    parser_classes = [RawBodyParser]

    @extend_schema(
        request={"text/tab-separated-values": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter("table", str, enum=["by_cond", "by_pair", "by_word"]),
            OpenApiParameter("pred_measure", str, enum=["surp", "prob", "perplexity"]),
            OpenApiParameter("word_summary", str, enum=["mean", "sum"]),
            OpenApiParameter("punctuation", str, enum=["previous", "next", "separate", "ignore"]),
            OpenApiParameter("conditions", str, description="condition columns, comma-separated"),
            OpenApiParameter("as", str, enum=["json", "tsv"]),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, name: str) -> HttpResponse:
        pair_set = get_object_or_404(MinimalPairSet, name=name)
        params = request.query_params
        table = params.get("table", "by_cond")
        data = request.data if isinstance(request.data, bytes) else b""
        try:
            if table not in ("by_cond", "by_pair", "by_word"):
                raise AnalysisError("table must be by_cond, by_pair or by_word")
            tokens = parse_predictions_tsv(data)
            options = AnalysisOptions(
                pred_measure=params.get("pred_measure", "surp"),
                word_summary=params.get("word_summary", "mean"),
                punctuation=params.get("punctuation", "previous"),
                conditions=tuple(
                    c.strip() for c in params.get("conditions", "").split(",") if c.strip()
                ),
            )
            result = analyze_minimal_pairs(
                tokens, pair_sets.pair_set_data(pair_set), options, tables=(table,)
            )
        except MinimalPairFormatError as exc:
            return Response(
                {"errors": [{"code": "invalid", **e.as_dict()} for e in exc.errors]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        except AnalysisError as exc:
            return Response(
                {"errors": [{"code": "invalid", "path": "analysis", "message": str(exc)}]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        out = getattr(result, table)
        if params.get("as") == "tsv":
            return HttpResponse(
                table_to_tsv(out), content_type="text/tab-separated-values; charset=utf-8"
            )
        return Response({"columns": out.columns, "rows": out.rows, "warnings": result.warnings})
