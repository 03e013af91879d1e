"""Names of people written in non-Latin scripts, by context, by name lists and by their shape.

The Latin name rules (:mod:`~agentic_loop.distill.data.pii.names`) see nothing
in "Write to Дмитрий Соколов", "Dear 王伟", "田中太郎様" or "김민준님", and the
English spaCy model does not either. :func:`find_script_names` splits a
text into runs of one script (Cyrillic, Greek, Armenian, Georgian, Arabic,
Hebrew, the Indic scripts, Thai, Han with kana, Hangul) and takes a run as
a name when:

* a **strong cue** stands before it: a title or salutation in English or
  in the run's language ("Dear", "Mr", "named", "customer", "Уважаемый",
  "κύριε", "السيد", "מר", "श्री", "尊敬的", "我叫", "คุณ", "Name:"), or an
  honorific after it ("先生", "女士", "様", "さん", "님", "씨", "जी");
* a **weak cue** ("to", "for", "with", "from", "ask", "cc"...) stands before
  it and the run looks like a name: capitalized words with one in the name
  lists (cased scripts), a listed word (caseless ones), a surname then one
  to three characters (Han), a surname syllable then a listed given name
  (Hangul), a katakana name with "・"; and it is not a known place;
* anywhere, two adjacent words are a first name and a surname of the name
  lists, or a Russian patronymic stands beside a capitalized word; or, in a
  Latin-script text, an isolated run is a listed name.

The name lists are Faker's person providers for every non-Latin locale
(Russian, Ukrainian, Bulgarian, Greek, Armenian, Georgian, Arabic, Persian,
Hebrew, Hindi, Marathi, Nepali, Bengali, Tamil, Thai, Chinese, Japanese,
Korean...); places come from :mod:`~agentic_loop.distill.data.pii.gazetteer`.
Ordinary words stay: a cased script needs capitals, a weak cue needs a
listed word, and Han text is never scanned for names without a cue.

Example:
    >>> text = "Write to Дмитрий Соколов and Dear 王伟, cc 김민준님. 我们的老师很好。"
    >>> [text[s:e] for s, e in find_script_names(text)]
    ['Дмитрий Соколов', '王伟', '김민준']
    >>> find_script_names("Москва — столица России. 我住在北京。 감사합니다")
    []
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import takewhile

from agentic_loop.distill.data.pii.gazetteer import is_place

__all__ = ["find_script_names", "script_name_lists", "script_of"]

_CASED = frozenset({"CYRILLIC", "GREEK", "ARMENIAN"})
_CASELESS = frozenset({"GEORGIAN", "ARABIC", "HEBREW", "DEVANAGARI", "BENGALI", "GUJARATI",
                       "GURMUKHI",
                       "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "ORIYA", "SINHALA", "THAI"})
_CJK_NAMES = {"CJK": "CJK", "HIRAGANA": "CJK", "KATAKANA": "CJK", "KATAKANA-HIRAGANA": "CJK",
              "IDEOGRAPHIC": "CJK", "HALFWIDTH": "CJK", "HANGUL": "HANGUL"}
_STRONG_EN = (r"(?i:dear|hi|hello|hey|mr|mrs|ms|mx|dr|prof|sir|madam|named|called|my name is|"
              r"name|signed|regards|thanks|cheers|sincerely|customer|client|patient|user|"
              r"colleague|employee|candidate|applicant|student|member|contact|sender|"
              r"recipient|manager|agent|from user)")
_STRONG_NATIVE = (r"уважаем(?:ый|ая|ые)|дорог(?:ой|ая)|здравствуйте|привет|господин|госпожа|г-н|"
                  r"г-жа|шановн(?:ий|а)|меня зовут|зовут|с уважением|имя|фио|клиент|"
                  r"αγαπητ[έή]|κύρι[εο]ς?|κυρία|κ\.|γεια σου|γεια σας|με λένε|ονομάζομαι|"
                  r"όνομα|السيد|السيدة|الأستاذ|الأستاذة|الدكتور|الدكتورة|د\.|عزيزي|عزيزتي|"
                  r"مرحبا|اسمي|الاسم|المهندس|מר|גברת|ד\"ר|שלום|לכבוד|היי|שמי|שם|בברכה|"
                  r"श्री|श्रीमती|सुश्री|डॉ\.|प्रिय|नमस्ते|मेरा नाम|नाम|आदरणीय|"
                  r"ชื่อ|이름은|이름|저는|성명|고객|안녕하세요|제 이름은|姓名|氏名|名前|联系人|"
                  r"聯絡人|收件人|客户|客戶|患者|お客様|お客さま|担当者|відправник|отримувач|отправитель|"
                  r"получатель")
_WEAK_EN = (r"(?i:to|for|with|from|by|cc|ask|tell|thank|thanks to|email|call|reply to|"
            r"write to|meet|invite|remind|notify|inform|congratulate|and|or|about|of|"
            # the same in Russian, Ukrainian, Greek, Arabic, Persian, Hebrew
            r"от|для|к|ко|с|со|у|о|об|про|и|від|до|з|із|та|από|για|με|προς|και|"
            r"من|إلى|الى|مع|عن|و|از|به|با|برای|עם|אל|מאת|של|את)")
_STRONG_BEFORE = re.compile(rf"(?:(?<![^\W\d_])(?:{_STRONG_EN})\.?|(?:{_STRONG_NATIVE}))"
                            # quotes and "=" too: '"name": "王小明"', name='Иван Петров'
                            r"[\"'”»]?[ \t]*[,:：=]?[ \t]*\n?[ \t]*[\"'“«]?$", re.IGNORECASE)
_WEAK_BEFORE = re.compile(rf"(?<![^\W\d_]){_WEAK_EN}[ \t]+$")
# cues and honorifics written inside a Han, kana, Hangul or Thai run, without a space
_CJK_PREFIX = re.compile(r"(?:尊敬的|亲爱的|親愛的|我叫|我是|名叫|叫做|私は|担当の|拝啓|致|"
                         r"联系|聯繫|聯絡|转告|轉告)")
# words an honorific follows that are no name: "お客様" (the customer), "皆様" (everyone)
_NOT_NAME = frozenset({"お客", "皆", "各位", "貴", "奥", "神"})
_CJK_SUFFIX = re.compile(r"(?:先生|女士|小姐|老师|老師|同学|同學|经理|經理|医生|醫生|教授|总|總|"
                         r"さん|様|さま|氏|君|くん|ちゃん|殿|先輩|部長|課長)")
_HANGUL_SUFFIX = re.compile(r"(?:님|씨|선생님|고객님|교수님|박사님|께서|에게|께|"
                            r"은|는|이|가|을|를|의|과|와|도)$")
_HONORIFIC_END = r"(?:님|씨)(?:께서|께|에게|은|는|이|가|을|를|의|도)?$"
_CUE_WORD = re.compile(_STRONG_NATIVE, re.IGNORECASE)
_CJK_PARTICLE = re.compile(r"[的是说在和与跟にはがをのと]")
_THAI_TITLE = re.compile(r"(?<!ขอบ)(?:คุณ|นางสาว|นาย|นาง|ดร\.)")
# case endings of Russian and Ukrainian names ("от Иванова Петра", "Ольге"), longest first
_CASE_ENDINGS = ("ого", "ому", "ой", "ей", "ом", "ем", "ым", "им", "ою", "ею", "а", "я", "у", "ю",
                 "е", "ы", "и")
# one-letter prefixes Hebrew and Arabic write on a name ("למרים": "to Miriam", "ولأحمد")
_PREFIX = {"HEBREW": "לבוהמשכ", "ARABIC": "لوبفك"}
_PATRONYMIC = re.compile(r"(?:ович|евич|ьич)(?:а|у|ем|е)?$|(?:овн|евн|ичн)(?:а|ы|е|у|ой)$")


@dataclass(frozen=True)
class _Run:
    start: int
    end: int
    script: str
    text: str


def script_of(char: str) -> str | None:
    """The script group of a letter or mark (``"CYRILLIC"``, ``"CJK"``, ``"HANGUL"``...),
    ``None`` for Latin, digits, spaces and punctuation.

    >>> script_of("Д"), script_of("王"), script_of("ー"), script_of("ा"), script_of("a")
    ('CYRILLIC', 'CJK', 'CJK', 'DEVANAGARI', None)
    """
    if char.isascii() or not (char.isalpha() or unicodedata.category(char) in ("Mn", "Mc")
                              or char in "ー々・"):
        return None
    head = unicodedata.name(char, "").split(" ")[0]
    if head in _CJK_NAMES:
        return _CJK_NAMES[head]
    return head if head in _CASED or head in _CASELESS else None


def _runs(text: str) -> list[_Run]:
    """Maximal runs of one non-Latin script (words for spaced scripts, whole runs for Han)."""
    runs: list[_Run] = []
    start, current = 0, None
    for i, char in enumerate([*text, " "]):
        script = script_of(char) if i < len(text) else None
        if script != current:
            if current is not None:
                runs.append(_Run(start, i, current, text[start:i]))
            start, current = i, script
    return runs


@lru_cache(maxsize=1)
def script_name_lists() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Per script group: (first names, surnames), lowercased, from Faker's non-Latin locales."""
    import importlib
    import pkgutil

    import faker.providers.person as person

    lists: dict[str, tuple[set[str], set[str]]] = {}
    for module in pkgutil.iter_modules(person.__path__):
        provider = getattr(importlib.import_module(f"{person.__name__}.{module.name}"),
                           "Provider", None)
        for attr, index in (("first_names", 0), ("first_names_male", 0),
                            ("first_names_female", 0), ("last_names", 1)):
            names = getattr(provider, attr, ())
            for name in names if isinstance(names, (tuple, list, dict)) else ():
                script = script_of(name[0]) if isinstance(name, str) and name else None
                if script is None:
                    continue
                parts = name.lower().split() if script != "CJK" else [name]
                lists.setdefault(script, (set(), set()))[index].update(parts)
    return {k: (frozenset(f), frozenset(s)) for k, (f, s) in lists.items()}


def _listed(word: str, script: str, index: int | None = None) -> bool:
    """Whether ``word`` is a listed first name (``index`` 0) or surname (1), inflected or not."""
    first, last = script_name_lists().get(script, (frozenset(), frozenset()))
    low = word.lower()
    forms = {low}
    if script == "CYRILLIC":  # the listed nominative: Петра -> петр, Иванова -> иванов(а)
        for end in _CASE_ENDINGS:
            if low.endswith(end) and len(low) > len(end) + 2:
                forms.update(low[:-len(end)] + tail for tail in ("", "а", "я", "й", "ь"))
    return any((index != 1 and f in first) or (index != 0 and f in last) for f in forms)


def _han_surname(run: str) -> int:
    """Length of the listed Chinese/Japanese surname ``run`` starts with (0 for none)."""
    surnames = script_name_lists().get("CJK", (frozenset(), frozenset()))[1]
    return next((n for n in (2, 1) if len(run) > n and run[:n] in surnames), 0)


def _hangul_name(word: str, *, strong: bool) -> bool:
    first, last = script_name_lists().get("HANGUL", (frozenset(), frozenset()))
    if not 2 <= len(word) <= 4:
        return False
    return strong or (word[0] in last and (word[1:] in first or len(word) == 3))


def _phrase(runs: list[_Run], i: int, text: str, limit: int = 3) -> list[_Run]:
    """The run at ``i`` and the runs of the same script after it, one space apart."""
    out = [runs[i]]
    for nxt in runs[i + 1:]:
        if len(out) >= limit or nxt.script != out[-1].script or text[out[-1].end:nxt.start] != " ":
            break
        out.append(nxt)
    return out


def _name_words(phrase: list[_Run], text: str, *, strong: bool) -> tuple[int, int] | None:
    """The span of the name-like prefix of ``phrase`` (spaced scripts)."""
    script = phrase[0].script
    if script in _CASED:
        words = list(takewhile(lambda r: r.text[0].isupper(), phrase))
        if not words:
            return None
        if not strong and not (any(_listed(w.text, script) for w in words)
                               or any(_PATRONYMIC.search(w.text) for w in words)):
            return None
    else:  # caseless: the first word, then listed ones (the second one too after a strong cue)
        if not strong and not any(_listed(w.text, script) for w in phrase[:2]):
            return None
        words = phrase[:1]
        for k, word in enumerate(phrase[1:], start=1):
            if not (_listed(word.text, script) or (strong and k == 1)):
                break
            words.append(word)
    span = (words[0].start, words[-1].end)
    if not strong and is_place(text[span[0]:span[1]]):
        return None
    return span


def _cjk_name(run: _Run, *, strong: bool) -> tuple[int, int] | None:
    """A Han or katakana name at the start of a CJK run (the run follows a cue)."""
    value = run.text
    cut = _CJK_SUFFIX.search(value)
    body = value[:cut.start()] if cut else value
    body = _CJK_PARTICLE.split(body, maxsplit=1)[0] or body
    if "・" in body or all(unicodedata.name(c, "").startswith("KATAKANA") for c in body):
        return (run.start, run.start + len(body)) if len(body) >= 2 else None
    surname = _han_surname(body)
    if strong:  # a surname and up to two more characters, or the first three
        length = min(len(body), surname + 2 if surname else 3)
        return run.start, run.start + length
    if surname and 2 <= len(body) <= 4 and not is_place(body):
        return run.start, run.start + len(body)
    return None


def _cue_names(text: str, runs: list[_Run]) -> Iterator[tuple[int, int]]:
    for i, run in enumerate(runs):
        before = text[max(0, run.start - 40):run.start]
        strong = bool(_STRONG_BEFORE.search(before))
        weak = not strong and bool(_WEAK_BEFORE.search(before))
        if not (strong or weak):
            continue
        if run.script == "CJK":
            span = _cjk_name(run, strong=strong)
        elif run.script == "HANGUL":
            word = _HANGUL_SUFFIX.sub("", run.text)
            span = (run.start, run.start + len(word)) if _hangul_name(
                word, strong=strong) else None
        else:
            span = _name_words(_phrase(runs, i, text), text, strong=strong)
        if span is not None:
            yield span


def _inner_cues(text: str, runs: list[_Run]) -> Iterator[tuple[int, int]]:
    """Cues and honorifics written inside CJK, Hangul and Thai runs."""
    for i, run in enumerate(runs):
        if run.script == "CJK":
            for cue in _CJK_PREFIX.finditer(run.text):
                sub = _Run(run.start + cue.end(), run.end, "CJK", run.text[cue.end():])
                if sub.text and (span := _cjk_name(sub, strong=True)):
                    yield span
            for honor in _CJK_SUFFIX.finditer(run.text):
                head = run.text[:honor.start()]
                head = _CJK_PARTICLE.split(head)[-1]
                n = next((k for k in (3, 2) if len(head) >= k and _han_surname(head[-k:])), 0)
                if n == 0 and head and head not in _NOT_NAME and (all(unicodedata.name(
                        c, "").startswith("KATAKANA") for c in head) or len(head) <= 4):
                    n = len(head)
                if n:
                    end = run.start + honor.start()
                    yield end - n, end
        elif run.script == "HANGUL" and re.search(_HONORIFIC_END, run.text):  # "박지훈님께"
            word = _HANGUL_SUFFIX.sub("", re.sub(r"(?:선생님|고객님|교수님|박사님)$", "",
                                                 re.sub(r"(?<=[님씨])[가-힣]{1,2}$", "", run.text)))
            if 2 <= len(word) <= 4:
                yield run.start, run.start + len(word)
        elif run.script == "HANGUL" and i + 1 < len(runs) and runs[i + 1].text in (
                "님", "씨", "선생님", "고객님") and text[run.end:runs[i + 1].start] == " ":
            if 2 <= len(run.text) <= 4:
                yield run.start, run.end
        elif run.script == "THAI":
            yield from _thai(text, runs, i)


def _thai(text: str, runs: list[_Run], i: int) -> Iterator[tuple[int, int]]:
    run = runs[i]
    for title in _THAI_TITLE.finditer(run.text):
        rest = run.text[title.end():]
        nxt = runs[i + 1] if i + 1 < len(runs) else None
        spaced = nxt is not None and nxt.script == "THAI" and text[run.end:nxt.start] == " "
        if 2 <= len(rest) <= 15 and (spaced or _listed(rest, "THAI", 0)):
            yield run.start + title.end(), nxt.end if spaced and nxt else run.end


def _list_names(text: str, runs: list[_Run]) -> Iterator[tuple[int, int]]:
    """Listed first name + surname (either order) and Russian patronymics, anywhere."""
    for a, b in zip(runs, runs[1:], strict=False):
        if a.script != b.script or a.script in ("CJK", "HANGUL") or text[a.end:b.start] != " ":
            continue
        cased = a.script in _CASED
        if cased and not (a.text[0].isupper() and b.text[0].isupper()):
            continue
        if _CUE_WORD.fullmatch(a.text):  # "שלום דוד": a greeting before the name, also a name
            continue
        for cut in (0, 1) if a.text[0] in _PREFIX.get(a.script, "") else (0,):
            head = a.text[cut:]  # "למרים לוי": "to" Miriam Levi
            pair = (_listed(head, a.script, 0) and _listed(b.text, b.script, 1)) or (
                _listed(head, a.script, 1) and _listed(b.text, b.script, 0))
            patronymic = cased and bool(_PATRONYMIC.search(b.text) or _PATRONYMIC.search(a.text))
            if pair or patronymic:
                yield a.start + cut, b.end
                break


def _isolated(text: str, runs: list[_Run]) -> Iterator[tuple[int, int]]:
    """In Latin-script text, a lone run of another script that is a listed name."""
    for i, run in enumerate(runs):
        phrase = _phrase(runs, i, text)
        end = phrase[-1].end
        before, after = runs[i - 1] if i else None, runs[i + len(phrase)] if i + len(
            phrase) < len(runs) else None
        if (before and run.start - before.end < 30) or (after and after.start - end < 30):
            continue  # inside a text of another script: the cue rules decide
        if not re.search(r"[A-Za-z]{2}", text[max(0, run.start - 30):end + 30]):
            continue
        if run.script == "CJK":
            surname = _han_surname(run.text)
            if surname and 2 <= len(run.text) <= 4 and not is_place(run.text) and all(
                    c in _han_given() for c in run.text[surname:]):
                yield run.start, run.end
        elif run.script == "HANGUL":
            given = script_name_lists().get("HANGUL", (frozenset(), frozenset()))[0]
            if _hangul_name(run.text, strong=False) and run.text[1:] in given:
                yield run.start, run.end
        elif len(phrase) >= 2:
            span = _name_words(phrase, text, strong=False)
            if span is not None:
                yield span


@lru_cache(maxsize=1)
def _han_given() -> frozenset[str]:
    first = script_name_lists().get("CJK", (frozenset(), frozenset()))[0]
    return frozenset(c for name in first for c in name)


def find_script_names(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every name in a non-Latin script, overlaps merged."""
    runs = _runs(text)
    if not runs:
        return []
    spans = sorted({*_cue_names(text, runs), *_inner_cues(text, runs), *_list_names(text, runs),
                    *_isolated(text, runs)})
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
