"""Netgsm's send request and answer, one message or many numbers for one text.

The reference is Netgsm's own client library, the ``netgsm/sms`` Composer package
(``src/SmsSend.php`` of the ``netgsm/sms`` repository on GitHub: ``smsGonder``, "1:n SMS
GÖNDERİMİ" in its ``README.md``); the answer's XML form is read as the most-used
Laravel client reads it (``parseXmlResponse`` in ``src/Sms/AbstractNetgsmMessage.php``
of ``tarfin-labs/netgsm``). The codes' table is :mod:`.netgsm_codes`; the kind, the
report query, the balance and inbound in :mod:`.netgsm`.

**Send**: ``POST {base_url}/sms/send/xml``, ``Content-Type: text/xml``, the body::

    <?xml version="1.0" encoding="UTF-8"?>
    <mainbody>
      <header>
        <company dil="TR">Netgsm</company>
        <usercode>…</usercode><password>…</password>
        <type>1:n</type>
        <msgheader>BASLIGIM</msgheader>      (the başlık: ``sender``)
        <filter>0</filter>                    (İYS: 0, 11 individuals, 12 merchants)
        <encoding>TR</encoding>               (Turkish characters; else empty)
      </header>
      <body><msg><![CDATA[the text]]></msg><no>905321234567</no><no>…</no></body>
    </mainbody>

One text to one number, or to many (``1:n``: one ``<no>`` each). ``filter`` (the
reference: "Ticari içerikli ileti gönderimi yapmıyorsanız 0 gönderilmelidir"): ``0`` a
message that is not commercial, ``11`` commercial to an individual (İYS-checked), ``12``
commercial to a trader; per message from its type and its recipient type with
``[compliance]`` (:mod:`.iys`), else the table's ``iys_filter``. The reference's send has
no brand code field (the İYS brand is the subscription's: code ``51`` without one).
Numbers go as the reference writes them: ``90…`` for Türkiye (its report gives them back
so), ``00`` and the country code abroad.

**Answer**: plain text ``<code> <bulk id>`` (``00 1311033503``) when the task was made
(codes ``00``, ``01``, ``02``), else the code alone (``30``); or, from newer accounts,
``<?xml …><xml><main><code>00</code><jobID>…</jobID></main></xml>``. The bulk id names
the whole task, not a message: the provider id recorded for each message is ``"<bulk
id>:<number>"`` (the number as E.164 digits), the pair a report line names. Netgsm
echoes no id of ours; it signs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import ClassVar
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import httpx

from appliance.config import OptionValue

from .adapter import ProviderAdapter
from .batch import BatchWireFormat
from .callback_token import CALLBACK_TOKEN
from .iys import IYS_ERROR, TACIR, one_iys
from .netgsm_codes import (
    ENCODING,
    IYS_FILTERS,
    NOT_COMMERCIAL,
    SEND_CODES,
    TO_INDIVIDUALS,
    TO_TRADERS,
    SendVerdict,
)
from .outcome import Outcome, OutgoingMessage, SubmitResult, blocked, short

SEND_PATH = "/sms/send/xml"
NATIONAL_PREFIX = "+90"
ANSWER_MAX = 64 * 1024  # a send answer is a code and an id: anything longer is not one
RETRY_AFTER_S = 60.0
_NO = re.compile(rb"<no>\s*([^<\s]*)\s*</no>")


def dest_of(msisdn: str) -> str:
    """A number as the reference writes it: ``90…`` for Türkiye, ``00…`` abroad."""
    digits = msisdn.removeprefix("+")
    return digits if msisdn.startswith(NATIONAL_PREFIX) else "00" + digits


def digits_of(number: str) -> str:
    """A number Netgsm wrote (``905…``, ``5…`` ten digits, ``05…``, ``00…``, ``+…``) as
    E.164 digits."""
    text = number.strip().removeprefix("+")
    if text.startswith("00"):
        return text[2:]
    if len(text) == 11 and text.startswith("05"):
        return "90" + text[1:]
    if len(text) == 10 and text.startswith("5"):
        return "90" + text
    return text


def provider_id(bulk_id: str, number: str) -> str:
    """The provider id of one message: its task and its number (E.164 digits)."""
    return f"{bulk_id}:{digits_of(number)}"


def bulk_of(pid: str | None) -> str | None:
    """The task (bulk id) of a recorded provider id, ``None`` without one."""
    bulk = (pid or "").split(":", 1)[0]
    return bulk if bulk.isdigit() else None


def cdata(text: str) -> str:
    """``text`` as CDATA; a ``]]>`` inside is split across two sections."""
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def read_send_answer(body: bytes) -> tuple[str, str | None]:
    """The code and the bulk id of a send answer (either form). ``ValueError`` when it is
    neither: an HTML page, an empty or a truncated body."""
    if len(body) > ANSWER_MAX:
        raise ValueError("answer too long to be a send answer")
    text = body.decode("utf-8").strip()
    if text.startswith("<?xml") or text.startswith("<xml"):
        root = ElementTree.fromstring(text)
        code = (root.findtext("main/code") or "").strip()
        bulk = (root.findtext("main/jobID") or "").strip() or None
    else:
        words = text.split()
        if not words or len(words) > 2:
            raise ValueError("not '<code> [<bulk id>]'")
        code, bulk = words[0], (words[1] if len(words) == 2 else None)
    if not code.isdigit() or len(code) > 4:
        raise ValueError(f"not a code: {code[:20]!r}")
    return code.zfill(2), bulk


class NetgsmWire(ProviderAdapter, BatchWireFormat):
    """Netgsm's send request and answer (one message or many numbers).

    Options: ``usercode`` and ``password`` (the API user of Netgsm's panel, as the API
    names them), ``callback_token`` (Netgsm pushes nothing the appliance reads, but the
    callback and inbound routes of a kind that signs nothing take a push only with it),
    ``iys_filter`` (``"0"``, ``"11"`` or ``"12"``: the ``filter`` of a message without
    ``[compliance]``; a message with it says its own).
    """

    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "usercode": "",
        "password": "",
        CALLBACK_TOKEN: "",
        "iys_filter": "0",
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"password", CALLBACK_TOKEN})
    OPTION_CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {"iys_filter": IYS_FILTERS}
    # The provider id is ours to make (bulk id and number): a report names only it.
    reports_by_provider_id_only: ClassVar[bool] = True

    def _check_settings(self) -> None:
        self._require("base_url", "usercode", "password")

    def credentials_xml(self) -> str:
        return (f"<usercode>{escape(self.option_str('usercode'))}</usercode>"
                f"<password>{escape(self.option_str('password'))}</password>")

    # -- send --------------------------------------------------------------------------

    def send_body(self, msgs: Sequence[OutgoingMessage]) -> str:
        """The XML of one ``1:n`` task: the first message's text to every number."""
        first = msgs[0]
        numbers = "".join(f"<no>{dest_of(m.msisdn)}</no>" for m in msgs)
        return ('<?xml version="1.0" encoding="UTF-8"?><mainbody><header>'
                '<company dil="TR">Netgsm</company>'
                f"{self.credentials_xml()}<type>1:n</type>"
                f"<msgheader>{escape(self.settings.sender)}</msgheader>"
                f"<filter>{self.filter_of(msgs)}</filter>"
                f"<encoding>{ENCODING.get(first.encoding, '')}</encoding>"
                f"</header><body><msg>{cdata(first.body)}</msg>{numbers}</body></mainbody>")

    def filter_of(self, msgs: Sequence[OutgoingMessage]) -> str:
        """``filter`` for these messages (one type and recipient type)."""
        iys = one_iys(m.iys for m in msgs)
        if iys is None:
            return self.option_str("iys_filter")
        if not iys.commercial:
            return NOT_COMMERCIAL
        return TO_TRADERS if iys.recipient_type == TACIR else TO_INDIVIDUALS

    def _send_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        return httpx.Request("POST", self.endpoint(SEND_PATH),
                             content=self.send_body(msgs).encode("utf-8"),
                             headers={"Content-Type": "text/xml; charset=UTF-8"})

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        return self._send_request([msg])

    def build_batch_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        if len({(m.body, m.encoding) for m in msgs}) != 1:
            raise ValueError("a batch holds messages of one text and one encoding")
        return self._send_request(msgs)

    def interpret_response(self, response: httpx.Response) -> Outcome:
        numbers = _asked_numbers(response)
        one = numbers[0] if len(numbers) == 1 else None
        return self._outcomes([one], response)[0]

    def _interpret_batch_response(self, msgs: Sequence[OutgoingMessage],
                                  response: httpx.Response) -> list[Outcome]:
        return self._outcomes([m.msisdn for m in msgs], response)

    def _outcomes(self, numbers: Sequence[str | None],
                  response: httpx.Response) -> list[Outcome]:
        """One outcome per number asked (``None``: the number is not known here, the id
        is then the bulk id alone)."""
        status = response.status_code
        text = short(response.content.decode("utf-8", "replace"), 120)
        if not 200 <= status < 300:
            return [self._http_refusal(response, text) for _ in numbers]
        try:
            code, bulk = read_send_answer(response.content)
        except (ValueError, ElementTree.ParseError):
            return [Outcome(SubmitResult.UNCERTAIN,
                            error=short(f"{self.kind}: unreadable answer: {text}"))
                    for _ in numbers]
        known = SEND_CODES.get(code)
        if known is None:  # not in the reference: it may have been taken
            return [Outcome(SubmitResult.UNCERTAIN,
                            error=short(f"{self.kind} {code}: undocumented answer: {text}"))
                    for _ in numbers]
        detail = short(f"{self.kind} {code}: {known.meaning}")
        if known.verdict is SendVerdict.ACCEPTED:
            if bulk is None or not bulk.isdigit():
                return [Outcome(SubmitResult.UNCERTAIN,
                                error=short(f"{detail}, but no bulk id: {text}"))
                        for _ in numbers]
            return [Outcome(SubmitResult.ACCEPTED,
                            provider_msg_id=provider_id(bulk, n) if n else bulk)
                    for n in numbers]
        one = self._refusal(known.verdict, detail, len(numbers))
        return [one for _ in numbers]

    @staticmethod
    def _refusal(verdict: SendVerdict, detail: str, count: int) -> Outcome:
        if verdict is SendVerdict.CREDENTIALS:
            return blocked("credentials", detail)
        if verdict is SendVerdict.SENDER_NOT_REGISTERED:
            return blocked("sender_not_registered", detail)
        if verdict in (SendVerdict.RATE, SendVerdict.SYSTEM):
            return Outcome(SubmitResult.RETRY, retry_after_s=RETRY_AFTER_S, error=detail)
        if verdict is SendVerdict.DUPLICATE and count > 1:
            # One number of the batch is over the limit and the answer does not say
            # which: no task was made, so none was sent and all may go again.
            return Outcome(SubmitResult.RETRY, retry_after_s=RETRY_AFTER_S,
                           error=short(f"{detail} (one number of a batch of {count})"))
        if verdict is SendVerdict.IYS:
            return Outcome(SubmitResult.REJECTED, error=short(f"İYS: {detail}"),
                           error_kind=IYS_ERROR)
        return Outcome(SubmitResult.REJECTED, error=detail)

    def _http_refusal(self, response: httpx.Response, text: str) -> Outcome:
        """Netgsm answers its codes with ``200``: another status is a proxy's or a
        gateway's. ``429``/``5xx`` as for every kind; anything else is not in the
        reference: not sent, never a made-up refusal."""
        generic = self.http_outcome(response, text)
        if generic is not None and generic.result is not SubmitResult.REJECTED:
            return generic
        return Outcome(SubmitResult.RETRY,
                       error=short(f"{self.kind} http {response.status_code}: {text}"
                                   " (undocumented)"))


def _asked_numbers(response: httpx.Response) -> list[str]:
    """The numbers the request this answers went to, read back from it (the transport
    keeps the request with the answer), as E.164 ``+digits``; ``[]`` without one."""
    try:
        sent = response.request.content
    except RuntimeError:
        return []
    return ["+" + digits_of(n.decode("ascii", "replace")) for n in _NO.findall(sent) if n]
