/**
 * A TCP proxy in front of a PostgreSQL server that, at a chosen moment of the protocol (when a session
 * of a given `application_name` sends a message containing a given text, such as the driver's array-type
 * query at connection start-up), either ends the session as `pg_terminate_backend` does (a FATAL 57P01
 * ErrorResponse, then the connection closed), which a real termination only hits by chance, or stops
 * passing the session's messages on, so that its client waits for an answer that never comes. It can also
 * shed sessions as a connection pooler or proxy does when it cannot serve (PgBouncer, RDS Proxy, Supavisor
 * restarting or over their limits): each one closed cleanly (a FIN, no ErrorResponse) as soon as its client
 * sends the start-up message, before the server ever answers. A client's request for TLS is refused, as by a pooler
 * without it.
 */
import type { Socket, TCPSocketListener } from 'bun';

/** The bytes PostgreSQL sends to a session `pg_terminate_backend` ends. */
function terminationMessage(): Uint8Array {
  const field = (code: string, value: string) => [code, value, '\0'].join('');
  const body = new TextEncoder().encode(
    field('S', 'FATAL') + field('V', 'FATAL') + field('C', '57P01') + field('M', 'terminating connection due to administrator command') + '\0',
  );
  const out = new Uint8Array(5 + body.length);
  out[0] = 'E'.charCodeAt(0);
  new DataView(out.buffer).setInt32(1, 4 + body.length);
  out.set(body, 5);
  return out;
}

/** The code of the SSLRequest packet a client sends before its start-up message to ask for TLS. */
const SSL_REQUEST = 80877103;

interface Session {
  upstream?: Socket<undefined>;
  /** Client bytes that arrived before the upstream connection opened. */
  pending: Uint8Array[];
  /** The start-up packet's text, once seen (it names application_name). */
  startup?: string;
  ended: boolean;
  /** Nothing more from the client is passed on. */
  swallowing: boolean;
  /** Closed, without a word, when its start-up message arrives (true), or its first message holding this text (opened while shedding). */
  shed: boolean | string;
}

export interface PgFaultProxy {
  port: number;
  /** The next client message of a session of `application` that contains `text` ends that session. */
  terminateOn(application: string, text: string): void;
  /** The next client message of a session of `application` that contains `text`, and all after it, are dropped. */
  swallowOn(application: string, text: string): void;
  /** Sessions ended so far. */
  readonly terminated: number;
  /** Sessions whose messages were dropped so far. */
  readonly swallowed: number;
  /**
   * While on, the sessions open are closed (FIN) and every new one is closed, FIN and no ErrorResponse, when
   * its client sends the start-up message, or (`at`) the first message that contains `at`, such as the
   * driver's array-type query sent once the server said it was ready; off, new sessions are passed through.
   */
  shed(on: boolean, at?: string): void;
  /** The next `count` new sessions are closed as `shed(true)` closes them (a transient hiccup); those after them are passed through. */
  shedNext(count: number): void;
  /** Client connections accepted so far: each is one connection attempt of a driver. */
  readonly opened: number;
  /** Sessions closed at start-up while shedding, so far. */
  readonly shedCount: number;
  stop(): void;
}

export async function startPgFaultProxy(upstreamPort: number): Promise<PgFaultProxy> {
  let armed: { application: string; text: string; swallow: boolean } | undefined;
  let terminated = 0;
  let swallowed = 0;
  let shedding: boolean | string = false;
  let shedNext = 0;
  let opened = 0;
  let shedCount = 0;
  const sessions = new Set<Socket<Session>>();
  const decoder = new TextDecoder('latin1');
  const end = (client: Socket<Session>) => {
    const s = client.data;
    if (s.ended) return;
    s.ended = true;
    sessions.delete(client);
    s.upstream?.end();
    client.end();
  };
  const listener: TCPSocketListener<Session> = Bun.listen<Session>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(client) {
        opened++;
        const shed = shedding || (shedNext > 0 && (shedNext--, true));
        client.data = { pending: [], ended: false, swallowing: false, shed };
        if (shed === true) return;
        sessions.add(client);
        void Bun.connect<undefined>({
          hostname: '127.0.0.1',
          port: upstreamPort,
          socket: {
            open(up) {
              client.data.upstream = up;
              for (const chunk of client.data.pending.splice(0)) up.write(chunk);
            },
            data(_up, chunk) {
              if (!client.data.ended) client.write(chunk);
            },
            close() {
              end(client);
            },
            error() {
              end(client);
            },
          },
        }).catch(() => end(client));
      },
      data(client, chunk) {
        const s = client.data;
        if (s.ended || s.swallowing) return;
        // The driver asks for TLS first (libpq's sslmode=prefer, Cinder's default): refused, as by a pooler without TLS,
        // so that what follows is the start-up message.
        if (s.startup === undefined && chunk.length === 8 && new DataView(chunk.buffer, chunk.byteOffset, 8).getInt32(4) === SSL_REQUEST) {
          client.write('N');
          return;
        }
        const text = decoder.decode(chunk);
        if (s.shed === true || (s.shed && text.includes(s.shed))) {
          shedCount++;
          end(client);
          return;
        }
        s.startup ??= text;
        if (armed && s.startup.includes(`application_name\0${armed.application}\0`) && text.includes(armed.text)) {
          const { swallow } = armed;
          armed = undefined;
          if (swallow) {
            swallowed++;
            s.swallowing = true;
            return;
          }
          terminated++;
          client.write(terminationMessage());
          end(client);
          return;
        }
        if (s.upstream) s.upstream.write(chunk);
        else s.pending.push(new Uint8Array(chunk));
      },
      close(client) {
        end(client);
      },
      error(client) {
        end(client);
      },
    },
  });
  return {
    port: listener.port,
    terminateOn(application, text) {
      armed = { application, text, swallow: false };
    },
    swallowOn(application, text) {
      armed = { application, text, swallow: true };
    },
    get terminated() {
      return terminated;
    },
    get swallowed() {
      return swallowed;
    },
    shed(on, at) {
      shedding = on && (at ?? true);
      if (on) for (const client of [...sessions]) end(client);
    },
    shedNext(count) {
      shedNext = count;
    },
    get opened() {
      return opened;
    },
    get shedCount() {
      return shedCount;
    },
    stop: () => listener.stop(true),
  };
}
