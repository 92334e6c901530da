/*
 * socket.js: the websockets of runner/consumers.py, reconnecting with back-off.
 *
 *   new LiveSocket(path, {onMessage, onOpen, onState}).open()
 *   new RunSocket(runId, {after, onEvents, onToken, onToolCall, onReplayed, onState}).open()
 *
 * RunSocket hands over every run event once and in seq order, and resumes after the last one it
 * saw when the connection comes back (/ws/runs/{id}/?after=N replays from the event log).
 * Messages are JSON; callers render their text with textContent, never as HTML.
 */

const MAX_DELAY_MS = 10000;

export class LiveSocket {
  constructor(path, { onMessage, onOpen, onState } = {}) {
    this.path = path;
    this.onMessage = onMessage || (() => {});
    this.onOpen = onOpen || (() => {});
    this.onState = onState || (() => {});
    this.delay = 1000;
    this.closed = false;
    this.ws = null;
  }

  url() {
    const path = typeof this.path === "function" ? this.path() : this.path;
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${window.location.host}${path}`;
  }

  open() {
    if (this.closed) return this;
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      this.delay = 1000;
      this.onState("open");
      this.onOpen(this);
    });
    ws.addEventListener("message", (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      this.onMessage(message);
    });
    ws.addEventListener("close", () => {
      if (this.closed || this.ws !== ws) return;
      // A refused handshake looks like any dropped connection to a browser: back off and retry.
      // Jitter spreads the reconnects of many pages after a server restart.
      this.onState("reconnecting");
      window.setTimeout(() => this.open(), this.delay * (0.75 + Math.random() / 2));
      this.delay = Math.min(this.delay * 2, MAX_DELAY_MS);
    });
    return this;
  }

  send(message) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
    this.onState("closed");
  }
}

export class RunSocket {
  constructor(runId, { after = 0, onEvents, onToken, onToolCall, onReplayed, onState } = {}) {
    this.last = after;
    const events = onEvents || (() => {});
    this.socket = new LiveSocket(() => `/ws/runs/${encodeURIComponent(runId)}/?after=${this.last}`, {
      onState,
      onMessage: (message) => {
        if (message.type === "events") {
          const fresh = message.events.filter((e) => e.seq > this.last);
          if (!fresh.length) return;
          this.last = fresh[fresh.length - 1].seq;
          events(fresh);
        } else if (message.type === "token") {
          if (onToken) onToken(message.seq, message.text, message.offset || 0);
        } else if (message.type === "tool_call") {
          // A call of the running step's tool loop: pushed live, not in the event log.
          if (onToolCall && message.data) onToolCall(message.data);
        } else if (message.type === "replayed") {
          if (onReplayed) onReplayed(message.last);
        }
      },
    });
  }

  open() {
    this.socket.open();
    return this;
  }

  close() {
    this.socket.close();
  }
}
