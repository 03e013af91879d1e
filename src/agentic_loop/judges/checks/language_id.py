"""Which natural language a text is written in, offline and without a model.

"Your ENTIRE response should be in German" is a check, not a judgment, so it
must not depend on a downloaded model or on a judge that says yes to
everything. Two plain signals do well on anything longer than a phrase:

* the **script** (Cyrillic, Devanagari, Hangul, Thai, ...) settles most
  non-Latin languages at once;
* within a script shared by several languages (Latin above all), the share
  of words found in each language's short list of its commonest function
  words ("the", "und", "les", "que", ...) picks the language.

A text too short to hold any such word is *undetermined* (``None``), never
guessed. :func:`in_language` also fails a text that carries a clearly
foreign sentence ("no other language is allowed").

Example:
    >>> detect_language("Der Hund schläft, und die Katze spielt mit dem Ball.")
    'de'
    >>> detect_language("Le chat dort sur le canapé et les enfants jouent."), detect_language("Ok")
    ('fr', None)
    >>> language_code("Spanish"), in_language("Hola, ¿cómo estás? Estoy muy bien.", "es")
    ('es', True)
"""

from __future__ import annotations

import unicodedata
from collections import Counter

from agentic_loop.judges.checks.text_measures import normalize, sentences, words

__all__ = ["LANGUAGE_NAMES", "detect_language", "in_language", "language_code"]

#: ISO 639-1 code -> English name, for every language this module can tell apart.
LANGUAGE_NAMES: dict[str, str] = {
    "en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
    "pt": "Portuguese", "nl": "Dutch", "sv": "Swedish", "da": "Danish", "fi": "Finnish",
    "tr": "Turkish", "pl": "Polish", "sw": "Swahili", "vi": "Vietnamese", "id": "Indonesian",
    "ro": "Romanian", "ru": "Russian", "uk": "Ukrainian", "bg": "Bulgarian", "ar": "Arabic",
    "fa": "Persian", "ur": "Urdu", "hi": "Hindi", "mr": "Marathi", "ne": "Nepali",
    "bn": "Bengali", "gu": "Gujarati", "pa": "Punjabi", "ta": "Tamil", "te": "Telugu",
    "kn": "Kannada", "ml": "Malayalam", "th": "Thai", "ko": "Korean", "ja": "Japanese",
    "zh": "Chinese", "el": "Greek", "he": "Hebrew",
}

_STOPWORDS: dict[str, str] = {
    "en": "the and of to is in that it was for with are this be have not you they on at by "
          "from but or as which their there what would will can all an were has its",
    "de": "der die das und ist nicht ein eine zu den mit sich des auf für im dem auch es "
          "ich wir sie werden wird von sind war bei einer aus wie oder aber noch nach",
    "fr": "le la les et des est un une du que qui dans pour pas sur au ce il elle nous vous "
          "sont avec plus par mais ou leur cette être ont aux ses",
    "es": "el la los las y de que en un una es por con para no se del al lo como más pero "
          "sus su le ya muy este esta son también hay está",
    "it": "il lo la gli le di che è e un una per non con del della sono si anche come più "
          "ma nel alla questo questa gli hanno dei delle",
    "pt": "o os as e de que em um uma é para não com do da dos das no na se por mais mas "
          "como seu sua são também ao foi está muito",
    "nl": "de het een en van is dat niet in op te zijn met voor er maar ook als aan bij "
          "wat wordt door nog dan hij zij",
    "sv": "och att det som en på är av för med till den inte har de om ett var jag men "
          "så vi kan från eller också",
    "da": "og at det som en på er af for med til den ikke har de om et var jeg men så vi "
          "kan fra eller også",
    "fi": "ja on ei se että oli hän ovat mutta kun tai myös mitä niin jo kuin tämä ole "
          "sen vain olla joka",
    "tr": "ve bir bu da de için ile çok ne gibi daha ama olarak var en değil ben sen o biz "
          "mi kadar",
    "pl": "i w na nie z się to że do jest jak po ale co tak za od są przez dla jego już "
          "czy oraz",
    "sw": "na ya wa kwa ni katika za la cha kuwa hii huo pia lakini wao yeye sisi kama "
          "sana kwamba",
    "vi": "và của là có không những các được cho trong một người này đã với để khi cũng "
          "như thì rất",
    "id": "dan yang di ini itu dengan untuk tidak dari dalam akan pada adalah juga ke "
          "saya kami mereka ada",
    "ro": "și de la în un o este că nu cu pe din care pentru sunt mai ce se lui ale",
    "ru": "и в не на что я с он как это по но они к у же вы за бы от из о так для",
    "uk": "і в не на що я з він як це по але вони до у же ви за би від із про так для є",
    "bg": "и в не на че аз с той как това по но те за да се от от е са ще към",
    "ar": "في من على أن إلى هذا التي الذي مع عن كان هذه ما لا هو كل قد",
    "fa": "و در به از که این را با است برای آن یک می تا شد بر هم",
    "ur": "اور کے میں کی ہے کو سے یہ ایک کا پر نہیں ہیں تھا وہ بھی",
    "hi": "और के है में की को से यह एक का पर नहीं हैं था वह भी हम",
    "mr": "आणि आहे या व की हे ते एक त्या ना तर होते मी आम्ही",
    "ne": "र छ को मा यो पनि एक हो गर्न थियो भने तर हुन्छ",
}
_STOPSETS = {code: frozenset(text.split()) for code, text in _STOPWORDS.items()}

# Script name (first word of the Unicode character name) -> the languages written in it.
_SCRIPTS: dict[str, tuple[str, ...]] = {
    "LATIN": ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "fi", "tr", "pl", "sw",
              "vi", "id", "ro"),
    "CYRILLIC": ("ru", "uk", "bg"), "ARABIC": ("ar", "fa", "ur"),
    "DEVANAGARI": ("hi", "mr", "ne"), "BENGALI": ("bn",), "GUJARATI": ("gu",),
    "GURMUKHI": ("pa",), "TAMIL": ("ta",), "TELUGU": ("te",), "KANNADA": ("kn",),
    "MALAYALAM": ("ml",), "THAI": ("th",), "HANGUL": ("ko",), "HIRAGANA": ("ja",),
    "KATAKANA": ("ja",), "CJK": ("zh",), "GREEK": ("el",), "HEBREW": ("he",),
}
_ALIASES = {"farsi": "fa", "mandarin": "zh", "brazilian portuguese": "pt",
            "bahasa indonesia": "id", "kiswahili": "sw"}


def language_code(name: str) -> str | None:
    """The ISO 639-1 code of a language name or code (``"German"``, ``"de"``), else None.

    >>> language_code("FRENCH"), language_code("pt"), language_code("Klingon")
    ('fr', 'pt', None)
    """
    key = name.strip().casefold()
    if key in LANGUAGE_NAMES:
        return key
    by_name = {v.casefold(): k for k, v in LANGUAGE_NAMES.items()}
    return by_name.get(key) or _ALIASES.get(key)


def _script_counts(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            script = unicodedata.name(ch, "UNKNOWN").split(" ")[0]
            counts[script] += 1
    return counts


def _stopword_hits(text: str, candidates: tuple[str, ...]) -> Counter[str]:
    tokens = [normalize(w) for w in words(text)]
    hits: Counter[str] = Counter()
    for code in candidates:
        stops = _STOPSETS.get(code)
        if stops:
            hits[code] = sum(1 for t in tokens if t in stops)
    return hits


def detect_language(text: str) -> str | None:
    """The ISO code of the language ``text`` is written in, or None when undetermined.

    >>> detect_language("Это очень хорошая книга, и я её люблю."), detect_language("123 !!")
    ('ru', None)
    """
    scripts = _script_counts(text)
    if not scripts:
        return None
    if scripts["HIRAGANA"] + scripts["KATAKANA"] > 0:
        return "ja"
    script = scripts.most_common(1)[0][0]
    candidates = _SCRIPTS.get(script, ())
    if len(candidates) == 1:
        return candidates[0]
    hits = _stopword_hits(text, candidates)
    ranked = hits.most_common(2)
    if not ranked or ranked[0][1] == 0:
        return None
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return None  # a tie is undetermined
    return ranked[0][0]


def in_language(text: str, code: str) -> bool:
    """True when ``text`` is in the language ``code`` and no sentence is clearly in another.

    A text too short to tell passes only when it is in the right script and
    no other language's function words outnumber the wanted one's.

    >>> in_language("The cat sleeps. Die Katze schläft auf dem Sofa und der Hund auch.", "en")
    False
    >>> in_language("Guten Morgen", "de"), in_language("Good morning to you", "de")
    (True, False)
    >>> in_language("42", "en")
    False
    """
    if not words(text):
        return False
    detected = detect_language(text)
    if detected is not None:
        if detected != code:
            return False
    else:
        scripts = _script_counts(text).most_common(1)
        if not scripts:  # digits and signs only: nothing is written in any language
            return False
        script = scripts[0][0]
        candidates = _SCRIPTS.get(script, ())
        if code not in candidates:
            return False
        hits = _stopword_hits(text, candidates)
        if any(n > hits[code] for n in hits.values()) or (
                hits[code] == 0 and len(words(text)) >= 4 and len(candidates) > 1
                and any(n for n in hits.values())):
            return False
    for sentence in sentences(text):
        if len(words(sentence)) >= 5:
            other = detect_language(sentence)
            if other is not None and other != code:
                hits = _stopword_hits(sentence, (code, other))
                if hits[other] >= 2 and hits[other] >= 2 * max(hits[code], 1):
                    return False
    return True
