"""An SMSC the project did not write: smpp34's own server (Rust), driven from Python.

Run as ``python -m tests.smpp.foreign_smsc PORT``. It accepts any bind, answers every
``submit_sm`` with ``F00D`` + a counter as the id, and pushes a delivery receipt for it
(``receipted_message_id`` and ``message_state`` TLVs and the usual text), delivering it
again, once, if the answer is not ``ESME_ROK``. After the first ``submit_sm`` it also
sends one inbound message. Everything it sees is printed as one JSON object a line.
"""

from __future__ import annotations

import asyncio
import json
import sys

import smpp34


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


async def push(esme: smpp34.Esme, message_id: str, recipient: str, source: str) -> None:
    text = (f"id:{message_id} sub:001 dlvrd:001 submit date:2501011200"
            f" done date:2501011201 stat:DELIVRD err:000 text:").encode("ascii")
    # receipted_message_id and message_state (the stubs lack their TLV_ constants)
    tlvs = [smpp34.Tlv(0x001E, message_id.encode() + b"\x00"),
            smpp34.Tlv(0x0427, b"\x02")]
    for attempt in (1, 2):
        resp = await esme.deliver_sm(destination_addr=source, source_addr=recipient,
                                     esm_class=0x04, short_message=text, tlvs=tlvs)
        emit(event="deliver_resp", id=message_id, attempt=attempt, status=resp.command_status)
        if resp.is_success:
            return
        await asyncio.sleep(0.05)


async def mo(esme: smpp34.Esme) -> None:
    resp = await esme.deliver_sm(destination_addr="ACME", source_addr="905320000001",
                                 esm_class=0, data_coding=8,
                                 short_message="IPTAL et".encode("utf-16-be"))
    emit(event="mo_resp", status=resp.command_status)


async def main(port: int) -> None:
    server = smpp34.Server(host="127.0.0.1", port=port, system_id="FOREIGN")
    await server.start()
    emit(event="ready", port=port)
    sessions: dict[str, smpp34.Esme] = {}
    tasks: set[asyncio.Task[None]] = set()
    count = 0
    while True:
        ev = await server.next()
        if isinstance(ev, smpp34.Esme):
            sessions[ev.session_id] = ev
            emit(event="bind", system_id=ev.system_id)
        elif isinstance(ev, smpp34.SubmitSmEvent):
            count += 1
            message_id = f"F00D{count:04X}"
            ev.accept(message_id=message_id)
            emit(event="submit", id=message_id, destination=ev.destination_addr,
                 dest_ton=ev.dest_addr_ton, source=ev.source_addr, source_ton=ev.source_addr_ton,
                 esm_class=ev.esm_class, data_coding=ev.data_coding,
                 registered_delivery=ev.registered_delivery, short_message=ev.short_message.hex())
            esme = sessions[ev.session_id]
            for coro in ([push(esme, message_id, ev.destination_addr, ev.source_addr)]
                         + ([mo(esme)] if count == 1 else [])):
                task = asyncio.create_task(coro)
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        elif isinstance(ev, smpp34.Unbound):
            emit(event="unbound")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
