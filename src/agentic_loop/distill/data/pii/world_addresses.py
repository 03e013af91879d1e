"""Street addresses written the way Japan, China, Russia, Poland, Scandinavia and Iberia write them.

:mod:`~agentic_loop.distill.data.pii.addresses` matches the English, French,
Dutch, German and Korean layouts: a house number beside a street word.
These countries put the pieces elsewhere: a Japanese address runs from the
postcode (``〒150-0002``) through prefecture, city and district to block
numbers (``渋谷区神南1丁目2-3``), a Chinese one from province to ``路 88号``, a
Russian one names the street first and the house after ``д.``; Spain, Italy
and Brazil put a comma between street and number (``Rua Augusta, 1500``),
Poland writes ``ul.``, Scandinavia glues the street word on (``Drottninggatan``).
Each pattern still needs a street or block marker next to a number, so a
city named alone, a price or a date is no address.

Example:
    >>> text = "〒150-0002 東京都渋谷区渋谷2丁目21-1 まで"
    >>> [text[s:e] for s, e in find_world_addresses(text)]
    ['〒150-0002 東京都渋谷区渋谷2丁目21-1']
    >>> find_world_addresses("東京都に住んでいます。Rua Augusta is long.")
    []
"""

from __future__ import annotations

import re

__all__ = ["WORLD_PATTERNS", "find_world_addresses"]

_HAN = r"[\u3005\u3040-\u30ff\u4e00-\u9fff]"
_NUM = r"(?:\d{1,5}|[一二三四五六七八九十百]+)"
_DASH = r"[-－−‐ー]"
_JP_BLOCKS = (rf"{_NUM}(?:丁目|{_DASH})\s?\d{{1,5}}(?:番地?|{_DASH})?\s?(?:\d{{1,5}}号?)?"
              rf"(?:\s?{_HAN}{{0,12}}?\d{{1,4}}(?:号室|階|F))?")
_JAPANESE = re.compile(
    rf"(?:〒\s?\d{{3}}{_DASH}?\d{{4}}\s*)?(?:{_HAN}{{2,3}}[都道府県])?"
    rf"{_HAN}{{1,8}}?[市区町村郡]{_HAN}{{0,10}}?{_JP_BLOCKS}")
_JP_POSTAL = re.compile(rf"〒\s?\d{{3}}{_DASH}?\d{{4}}")
_JP_ROMAN = re.compile(
    r"\b\d{1,4}-\d{1,4}(?:-\d{1,4})?,?\s+[A-Z][a-z]+(?:[-\s][A-Z][a-z]+)?"
    r"(?:,\s*[A-Z][a-z]+-(?:ku|shi|cho|machi|gun|ken))+(?:,\s*[A-Z][a-z]+)?(?:,?\s+\d{3}-\d{4})?")
# simplified and traditional Chinese: the district is optional, the 路 and 号 are not
_CHINESE = re.compile(
    rf"(?:\d{{3,6}}\s?)?(?:{_HAN}{{2,7}}?(?:省|自治区))?(?:{_HAN}{{2,4}}?[市縣县])?"
    rf"(?:{_HAN}{{1,4}}?[区县旗區縣鄉镇鎮])?"
    rf"{_HAN}{{1,10}}?(?:路|街|道|巷|大道|胡同|里|弄)(?:\s?\d{{1,3}}\s?段)?(?:\d{{1,4}}[巷弄])?"
    rf"\s?\d{{1,5}}\s?[号號](?![线線])(?:之\d{{1,3}})?"
    rf"(?:\s?{_HAN}{{0,8}}?[A-Za-z0-9]{{1,5}}\s?(?:号楼|號樓|栋|棟|幢|座|单元|單元|层|層|室|楼|樓))*")
_CYR = r"[А-ЯЁA-Z][а-яёa-z\-]+"
_RUSSIAN = re.compile(
    rf"(?:\d{{6}},\s*)?(?:(?:г\.|город)\s*{_CYR},\s*)?"
    rf"(?:ул\.|улица|пр-т|пр\.|проспект|пер\.|переулок|бульвар|б-р|наб\.|набережная|шоссе|"
    rf"пл\.|площадь|вул\.|вулиця)\s*{_CYR}(?:\s+{_CYR})?,?\s*(?:д\.|дом|буд\.)\s*\d{{1,4}}"
    rf"[а-яё]?(?:,?\s*(?:кв\.|квартира|корп\.|к\.|стр\.|офис)\s*\d{{1,4}})*"
    rf"(?:,\s*(?:г\.\s*)?{_CYR})?(?:,\s*\d{{6}})?")
_POLISH = re.compile(
    r"\b(?:ul\.|al\.|os\.|pl\.)\s+[A-ZŁŚŻŹĆ][\wąćęłńóśźż\-]+(?:\s+[A-ZŁŚŻŹĆ][\wąćęłńóśźż\-]+)?"
    r"\s+\d{1,4}[a-zA-Z]?(?:/\d{1,4})?(?:,\s*\d{2}-\d{3}\s+[A-ZŁŚŻŹĆ][\wąćęłńóśźż\-]+)?")
_CITY = r"[A-ZÀ-Þ][\wÀ-ÿ'\-]+(?:\s+(?:de\s+|do\s+|da\s+)?[A-ZÀ-Þ][\wÀ-ÿ'\-]+){0,2}"
_IBERIAN = re.compile(
    r"\b(?:C/|Calle|Avda\.|Avenida|Av\.|Paseo|Plaza|Pza\.|Carrer|Camino|Ronda|Travesía|Via|Viale|"
    r"Corso|Piazza|Largo|Vicolo|Rua|Praça|Travessa|Alameda|Estrada)\s+"
    r"(?:(?:de|del|la|las|los|da|do|dos|das|della|delle|dei|di)\s+)*"
    r"[A-ZÀ-Þ][\wÀ-ÿ'\-]+(?:\s+(?:(?:de|del|la|da|do|di)\s+)?[A-ZÀ-Þ][\wÀ-ÿ'\-]+){0,3}"
    r",?\s*(?:n[º°o]\.?\s*)?\d{1,5}[A-Za-z]?(?![\w.,]\d)(?:\s*[-–]\s*" + _CITY + r")?"
    r"(?:,\s*(?:\d{5}(?:-\d{3})?\s+)?" + _CITY + r"(?:\s*[-–]\s*[A-Z]{2})?)?"
    r"(?:,\s*\d{5}(?:-\d{3})?)?")
_NORDIC = re.compile(
    r"\b[A-ZÅÄÖÆØ][a-zåäöæøéü]+(?:gatan|gata|gaten|gade|gate|vej|veien|vägen|väg|gränd|stigen|"
    r"torget|backe|backen|allén|katu|tie)"
    r"\s+\d{1,4}[A-Za-z]?(?:,\s*\d{3}\s?\d{2}\s+" + _CITY + r")?")
_POSTCODE_CITY = re.compile(  # after a street-first address: "28013 Madrid", "01310-200 São Paulo"
    r"\b(?:Calle|Via|Viale|Corso|Piazza|Rua|Avenida|Plaza)\s+[^,\n]{2,40}?\s\d{1,5}[A-Za-z]?"
    r",\s*\d{5}(?:-\d{3})?\s+" + _CITY)

#: Patterns added to the street-address recognizer.
WORLD_PATTERNS: tuple[re.Pattern[str], ...] = (_JAPANESE, _JP_POSTAL, _JP_ROMAN, _CHINESE,
                                               _RUSSIAN, _POLISH, _IBERIAN, _NORDIC,
                                               _POSTCODE_CITY)


def find_world_addresses(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the addresses these layouts find, overlaps merged."""
    spans = sorted(m.span() for p in WORLD_PATTERNS for m in p.finditer(text))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
