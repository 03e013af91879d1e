"""The regex-only PII gate: phones (Korean formats), e-mails, cards, accounts, drops and reports."""

from __future__ import annotations

import pytest
from presidio_analyzer import EntityRecognizer, RecognizerResult

from agentic_loop.distill.data.pii.gate import PiiError, PiiGate, PiiReport
from agentic_loop.distill.data.pii.recognizers import bank_account_recognizer


@pytest.fixture(scope="module")
def gate() -> PiiGate:
    return PiiGate("regex")


@pytest.mark.parametrize("phone", ["010-1234-5678", "+82 10 1234 5678", "+82-10-1234-5678",
                                   "02-312-3456",
                                   # blocks phonenumbers calls unallocated
                                   "010-5975-8829", "+82 10 5975 8829",
                                   "(212) 555-0175", "+44 20 7946 0958"])
def test_phone_numbers_are_replaced_by_a_typed_placeholder(gate: PiiGate, phone: str) -> None:
    result = gate.anonymize(f"Call me at {phone} tomorrow.")
    assert result.text == "Call me at <PHONE_NUMBER> tomorrow."
    assert result.entities == ("PHONE_NUMBER",)


def test_phone_regions_are_configurable() -> None:
    us_only = PiiGate("regex", phone_regions=["US"], entities=["PHONE_NUMBER"])
    # a Korean national format is left; an international one is matched in every region
    assert us_only.anonymize("Call 010-1234-5678.").text == "Call 010-1234-5678."
    assert us_only.anonymize("Call +82 10 1234 5678.").text == "Call <PHONE_NUMBER>."
    assert us_only.phone_regions == ("US",)
    with pytest.raises(PiiError, match="unknown phone region.*XX"):
        PiiGate("regex", phone_regions=["KR", "XX"])


def test_emails_and_other_patterns(gate: PiiGate) -> None:
    text = ("Mail ana.kim@example.co.kr or bob@mail.example.com, card 4111 1111 1111 1111, "
            "IBAN DE89370400440532013000, IP 192.168.10.20, RRN 900101-1234567.")
    result = gate.anonymize(text)
    assert result.text == ("Mail <EMAIL_ADDRESS> or <EMAIL_ADDRESS>, card <CREDIT_CARD>, "
                           "IBAN <IBAN_CODE>, IP <IP_ADDRESS>, RRN <KR_RRN>.")
    assert result.entities == ("EMAIL_ADDRESS", "EMAIL_ADDRESS", "CREDIT_CARD", "IBAN_CODE",
                               "IP_ADDRESS", "KR_RRN")


def test_an_address_on_no_public_suffix_is_not_an_email(gate: PiiGate) -> None:
    assert gate.anonymize("user@host.notarealtld").text == "user@host.notarealtld"


@pytest.mark.parametrize("text", ["My bank account is 110-23-456789.",
                                  "계좌번호 110-23-456789 로 입금해 주세요",
                                  "110-23-456789 (account at Shinhan)"])
def test_bank_account_with_context_is_redacted(gate: PiiGate, text: str) -> None:
    result = gate.anonymize(text)
    assert "110-23-456789" not in (result.text or "")
    assert result.entities == ("BANK_ACCOUNT",)


@pytest.mark.parametrize("text", ["Order 110-23-456789 shipped.",
                                  "Part no. 110-23-456789 is out of stock."])
def test_bank_account_pattern_without_context_is_left(gate: PiiGate, text: str) -> None:
    assert gate.anonymize(text).text == text


def test_context_word_must_be_a_whole_english_word() -> None:
    recognizer = bank_account_recognizer()
    assert recognizer.has_context("bank: 110-23-456789", 6, 19)
    assert not recognizer.has_context("embankment 110-23-456789", 11, 24)
    far = "account" + " " * 60 + "110-23-456789"
    assert not recognizer.has_context(far, far.index("1"), len(far))


def test_entities_are_configurable() -> None:
    emails_only = PiiGate("regex", entities=["EMAIL_ADDRESS"])
    result = emails_only.anonymize("a@example.com, 010-1234-5678")
    assert result.text == "<EMAIL_ADDRESS>, 010-1234-5678"
    assert emails_only.entities == ("SECRET", "EMAIL_ADDRESS")  # secrets go in every gate


def test_regex_mode_finds_names_by_rules_but_cannot_promise_places() -> None:
    gate = PiiGate("regex")
    assert {"PERSON", "STREET_ADDRESS", "SECRET"} <= set(gate.entities)
    assert gate.unavailable == ("LOCATION",)
    assert gate.anonymize("Dear Ms. Okonkwo, thanks.").text == "Dear Ms. <PERSON>, thanks."
    with pytest.raises(PiiError, match="cannot detect LOCATION.*mode='spacy'"):
        PiiGate("regex", entities=["LOCATION", "EMAIL_ADDRESS"])
    with pytest.raises(PiiError, match="PII mode must be one of"):
        PiiGate("fast")  # type: ignore[arg-type]


def test_batch_matches_one_by_one(gate: PiiGate) -> None:
    texts = [f"Ticket {i}: reach me at user{i}@example.com or 010-{1000 + i}-5678."
             for i in range(40)]
    texts += ["", "   ", "nothing to hide here"]
    assert gate.anonymize_many(texts) == [gate.anonymize(t) for t in texts]


def test_progress_counts_every_text(gate: PiiGate) -> None:
    seen: list[int] = []
    small = PiiGate("regex", batch_size=4, max_chars=50)
    small.anonymize_many(["a@example.com"] * 9 + ["x" * 51], progress=seen.append)
    assert sum(seen) == 10


class _FailsOnBoom(EntityRecognizer):
    """A recognizer that crashes on one input, as a buggy third-party recognizer would."""

    def __init__(self) -> None:
        super().__init__(supported_entities=["TICKET_ID"], name="FailsOnBoom")

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: object = None) -> list[RecognizerResult]:
        if "boom" in text:
            raise RuntimeError("recognizer crashed")
        return []


def test_a_text_the_analyzer_fails_on_is_dropped_alone() -> None:
    gate = PiiGate("regex", recognizers=[_FailsOnBoom()], batch_size=8)
    assert "TICKET_ID" in gate.entities
    results = gate.anonymize_many(["mail a@example.com", "boom", "fine"])
    assert [r.ok for r in results] == [True, False, True]
    assert results[0].text == "mail <EMAIL_ADDRESS>"
    assert results[1].dropped == "analyzer_error"
    assert results[1].error == "RuntimeError in the analyzer"  # never the message: it may quote
    assert gate.anonymize("boom").dropped == "analyzer_error"


def test_too_long_texts_are_dropped_and_reported(gate: PiiGate) -> None:
    short = PiiGate("regex", max_chars=30)
    results = short.anonymize_many(["Call 010-1234-5678", "x" * 31])
    assert results[1].text is None and results[1].dropped == "too_long"
    assert results[1].error == "31 characters, over max_chars=30"
    report = short.report(results)
    assert (report.texts, dict(report.redactions), dict(report.dropped)) == (
        2, {"PHONE_NUMBER": 1}, {"too_long": 1})


def test_report_counts_redactions_per_entity_type(gate: PiiGate) -> None:
    results = gate.anonymize_many(["a@example.com and b@example.com", "010-1234-5678", "clean"])
    report = gate.report(results)
    assert report.to_dict()["redactions"] == {"EMAIL_ADDRESS": 2, "PHONE_NUMBER": 1}
    assert report.texts == 3 and not report.dropped
    assert PiiReport.of("regex", (), []).to_dict()["texts"] == 0


def test_off_mode_passes_text_through_but_still_removes_secrets_and_bounds_length() -> None:
    gate = PiiGate("off", max_chars=100)
    assert gate.anonymize("a@example.com").text == "a@example.com"
    assert gate.anonymize("use hf_J1atsnBYLMPuDCCRnGEY59YVkQfsGQONvf").text == "use <SECRET>"
    assert gate.describe()["entities"] == ["SECRET"]
    assert gate.anonymize_many(["y" * 101])[0].dropped == "too_long"


def test_bad_settings_are_named() -> None:
    with pytest.raises(PiiError, match="score_threshold"):
        PiiGate("off", score_threshold=2)
    with pytest.raises(PiiError, match="max_chars and batch_size"):
        PiiGate("off", batch_size=0)
    with pytest.raises(TypeError, match="text 1 for the PII gate is int"):
        PiiGate("off").anonymize_many(["ok", 3])  # type: ignore[list-item]
