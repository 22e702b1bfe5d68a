// An SMSC the project did not write: node-smpp's server, for the SMPP tests.
//
// Run as `node smsc.js`. It listens on 127.0.0.1 (a free port), accepts any bind,
// answers every submit_sm with "N" + a counter as the id and, when a receipt is asked,
// pushes a deliver_sm receipt (receipted_message_id and message_state TLVs and the usual
// text). Everything it sees is printed as one JSON object a line: the submit_sm's bytes
// as received (short_message in hex, UDH included), data_coding and esm_class, and what
// node-smpp itself read of them (its UDH list and its decoded text).
//
// It answers query_sm (SMPP 3.4 §4.8) from the ids it issued: DELIVERED with the time it
// took the message as final_date, except by the recipient's last digit: 7 a
// message_state outside §5.2.28 (9), 8 a final_date that is not a time, 9 ENROUTE. An
// id it never issued is ESME_RQUERYFAIL. With SMSC_RECEIPTS=off it pushes no receipt.
'use strict';
const smpp = require('smpp');

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

// The raw PDU, kept beside node-smpp's own reading of it.
const fromBuffer = smpp.PDU.prototype.fromBuffer;
smpp.PDU.prototype.fromBuffer = function (buffer) {
  this.raw = Buffer.from(buffer);
  return fromBuffer.call(this, buffer);
};

// submit_sm's mandatory fields, read from the bytes (SMPP 3.4 §4.4.1).
function fields(raw) {
  let at = 16;
  const cstring = () => {
    const end = raw.indexOf(0, at);
    const s = raw.toString('latin1', at, end);
    at = end + 1;
    return s;
  };
  const octet = () => raw[at++];
  const out = {};
  out.service_type = cstring();
  out.source_ton = octet(); out.source_npi = octet(); out.source = cstring();
  out.dest_ton = octet(); out.dest_npi = octet(); out.destination = cstring();
  out.esm_class = octet(); out.protocol_id = octet(); out.priority_flag = octet();
  out.schedule_delivery_time = cstring(); out.validity_period = cstring();
  out.registered_delivery = octet(); out.replace_if_present = octet();
  out.data_coding = octet(); out.sm_default_msg_id = octet();
  const length = octet();
  out.short_message = raw.slice(at, at + length).toString('hex');
  return out;
}

let counter = 0;
const issued = new Map();  // id -> {destination, at}
const receipts = process.env.SMSC_RECEIPTS !== 'off';

function answer(pdu) {
  const known = issued.get(pdu.message_id);
  if (!known) {
    return pdu.response({ command_status: smpp.ESME_RQUERYFAIL });
  }
  const last = known.destination.slice(-1);
  const out = { message_id: pdu.message_id, final_date: known.at, message_state: 2,
    error_code: 0 };
  if (last === '7') {
    out.message_state = 9;
  } else if (last === '8') {
    out.final_date = '2026-01-01 12:00';
  } else if (last === '9') {
    out.message_state = 1;
    out.final_date = '';
  }
  return pdu.response(out);
}
const server = smpp.createServer({ debug: false }, (session) => {
  for (const bind of ['bind_transceiver', 'bind_transmitter', 'bind_receiver']) {
    session.on(bind, (pdu) => {
      emit({ event: 'bind', mode: bind, system_id: pdu.system_id });
      session.send(pdu.response());
    });
  }
  session.on('enquire_link', (pdu) => session.send(pdu.response()));
  session.on('unbind', (pdu) => {
    emit({ event: 'unbound' });
    session.send(pdu.response());
    session.close();
  });
  session.on('error', (err) => emit({ event: 'error', error: String(err) }));
  session.on('query_sm', (pdu) => {
    emit({ event: 'query', message_id: pdu.message_id, source_addr: pdu.source_addr,
      source_ton: pdu.source_addr_ton, source_npi: pdu.source_addr_npi });
    session.send(answer(pdu));
  });
  session.on('submit_sm', (pdu) => {
    counter += 1;
    const id = 'N' + counter;
    const sm = pdu.short_message || {};
    const event = Object.assign({ event: 'submit', id: id }, fields(pdu.raw));
    event.node_udh = (sm.udh || []).map((b) => Buffer.from(b).toString('hex'));
    event.node_text = typeof sm.message === 'string' ? sm.message : null;
    emit(event);
    issued.set(id, { destination: event.destination, at: new Date() });
    session.send(pdu.response({ message_id: id }));
    if (!receipts || !(event.registered_delivery & 1)) {
      return;
    }
    const text = 'id:' + id + ' sub:001 dlvrd:001 submit date:2601011200' +
      ' done date:2601011201 stat:DELIVRD err:000 text:';
    session.deliver_sm({
      source_addr: event.destination, source_addr_ton: event.dest_ton,
      source_addr_npi: event.dest_npi, destination_addr: event.source,
      esm_class: 0x04, short_message: text,
      receipted_message_id: id, message_state: 2,
    }, (resp) => emit({ event: 'deliver_resp', id: id, status: resp.command_status }));
  });
});

server.listen(0, '127.0.0.1', () => {
  emit({ event: 'ready', port: server.address().port });
});
