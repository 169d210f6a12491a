// The publish Worker: sends a canvas publisher's frames from off the page's thread (see
// "Publishing a canvas" in sync.js). It holds its own connection to syncd (the page's URL and
// client name) and the stream on it; the page transfers each frame's message buffer here and
// gets it back with the frame's sequence or the reason it was dropped.
import { SyncConnection, StreamSender } from './sync.js';

let conn = null;
let sender = null;
let drainTimer = null;

const post = (m, transfer) => self.postMessage(m, transfer ?? []);
const errorOf = (e) => ({ code: e?.code ?? 'error', message: String(e?.message ?? e), details: e?.details });

// The page admits a capture while the socket holds at most maxBufferedFrames frames, and learns
// the socket's level from each frame's answer. While the socket is above that bound, a 2 ms poll
// here tells the page the moment it drains below it: one message per frame of room, not one per
// poll (the page's thread is the one that renders).
function watchDrain() {
  if (drainTimer !== null) return;
  drainTimer = setInterval(() => {
    if (sender.congested()) return;
    post({ type: 'buffered', buffered: conn.bufferedAmount });
    clearInterval(drainTimer);
    drainTimer = null;
  }, 2);
}

async function start(m) {
  try {
    conn = new SyncConnection(m.url, { client: m.client, reconnect: m.reconnect, backoff: m.backoff, requestTimeoutMs: m.timeoutMs });
    await conn.ready;
    sender = new StreamSender(conn, m.stream);
    sender.on('open', ({ reply, reopened }) => post({ type: 'open', reply, reopened }));
    sender.on('down', () => post({ type: 'down' }));
    sender.on('error', (e) => post({ type: 'error', error: errorOf(e) }));
    await sender.openStream();
  } catch (e) {
    post({ type: 'error', error: errorOf(e) });
  }
}

self.onmessage = async ({ data: m }) => {
  switch (m.type) {
    case 'start':
      await start(m);
      return;
    case 'frame': {
      const result = sender ? sender.send(m.message, m.captureUs, m.bottomUp) : 'not_open';
      const buffered = conn?.bufferedAmount ?? 0;
      post({ type: 'sent', message: m.message, result, buffered }, [m.message]);
      if (sender?.congested()) watchDrain();
      return;
    }
    case 'report':
      sender?.report(m.counters);
      return;
    case 'ticket':
      try {
        if (!sender) throw Object.assign(new Error('stream is not open'), { code: 'not_open' });
        post({ type: 'ticket', id: m.id, ticket: await sender.createTicket(m.opts) });
      } catch (e) {
        post({ type: 'ticket', id: m.id, error: errorOf(e) });
      }
      return;
    case 'stop':
      try {
        await sender?.close(m.close);
      } catch (e) {
        post({ type: 'error', error: errorOf(e) });
      }
      clearInterval(drainTimer);
      conn?.close();
      post({ type: 'stopped' });
      return;
    default:
      break;
  }
};
