from __future__ import annotations

from suites.corpora import urls as corpora
from suites.minimal_pairs import urls as minimal_pairs
from suites.probing import urls as probing
from suites.syntaxgym import urls as syntaxgym

app_name = "suites"

# Each kind of data lists its own routes, pages and API, in its package.
urlpatterns = [
    *syntaxgym.urlpatterns,
    *minimal_pairs.urlpatterns,
    *probing.urlpatterns,
    *corpora.urlpatterns,
]

api_urlpatterns = [
    *syntaxgym.api_urlpatterns,
    *minimal_pairs.api_urlpatterns,
    *probing.api_urlpatterns,
    *corpora.api_urlpatterns,
]
