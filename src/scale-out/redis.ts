/**
 * The connection to Redis of a coordinator, a worker and `capsule doctor --redis`: a `redis://` or
 * `rediss://` (TLS) URL, with a user and password when it has them, checked at the start within a
 * bounded time so that an unreachable Redis is a clear error, never a hang.
 */
import { Redis, type RedisOptions } from 'ioredis';

/** How long a first connection may take before the start is refused. */
export const CONNECT_TIMEOUT_MS = 5000;

/** The URL as it may be printed: its password replaced by `***`. */
export function redisUrlText(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an unreadable Redis URL)';
  }
}

/** The options of every connection to `url`; refused (thrown) for a URL that is not `redis://` or `rediss://`. */
export function redisOptions(url: string): { readonly url: string; readonly options: RedisOptions } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`--redis ${redisUrlText(url)}: not a URL; write redis://[user:password@]host:port[/db] or rediss://… for TLS`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')
    throw new Error(`--redis ${redisUrlText(url)}: the scheme must be redis:// or rediss:// (TLS), not ${parsed.protocol}//`);
  // BullMQ's blocking connections need maxRetriesPerRequest null; the coordinator bounds an outage itself.
  return { url, options: { maxRetriesPerRequest: null, connectTimeout: CONNECT_TIMEOUT_MS, lazyConnect: true, enableOfflineQueue: true } };
}

/** A new connection to `url`, connected and answering PING, or a clear error within {@link CONNECT_TIMEOUT_MS}. */
export async function connectRedis(url: string, name: string): Promise<Redis> {
  const { options } = redisOptions(url);
  const redis = new Redis(url, { ...options, connectionName: name, retryStrategy: (times: number) => Math.min(times * 200, 2000) } as never);
  // ioredis reports every failed reconnection as an error event; the owner watches the connection's state instead.
  // The first one says why a first connection failed (NOAUTH, ECONNREFUSED) better than the closed connection does.
  let cause: Error | null = null;
  redis.on('error', (error: Error) => (cause ??= error));
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.connect().then(() => redis.ping()),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    redis.disconnect();
    const why = (cause ?? (error as Error)).message;
    throw new Error(`cannot reach Redis at ${redisUrlText(url)}: ${why}; ${connectFix(url, why)} (docs/scale-out.md#running-workers)`);
  } finally {
    clearTimeout(timer);
  }
  return redis;
}

/** What to do about a first connection that failed with `why`. */
function connectFix(url: string, why: string): string {
  let password = false;
  try {
    password = new URL(url).password !== '';
  } catch {
    // redisOptions refused it before
  }
  if (/WRONGPASS|invalid username-password/i.test(why)) return 'the user or password in the URL is not the one Redis knows: check them (redis://user:password@host:port, or redis://:password@… for requirepass)';
  if (/NOAUTH|auth/i.test(why)) return password ? 'Redis refused the password in the URL: check it' : 'Redis wants a password: give it in the URL (redis://:password@host:port)';
  return 'check that redis-server runs there and that this machine may reach it';
}

/** Whether a connection reaches Redis now, as {@link watchReach} follows it. */
export interface Reach {
  /** When the connection went (Date.now()), or null while it answers. */
  readonly downSince: number | null;
}

/**
 * Follows `redis`'s connection for its owner (a coordinator, a worker): `onDown` once when it is
 * lost (not while `ignored()`), `onBack` with how long it was out once it answers again. One
 * outage is one `onDown` however many reconnections fail meanwhile.
 */
export function watchReach(redis: Redis, handlers: { readonly ignored: () => boolean; readonly onDown: () => void; readonly onBack: (downMs: number) => void }): Reach {
  const reach: { downSince: number | null } = { downSince: null };
  redis.on('close', () => {
    if (reach.downSince !== null || handlers.ignored()) return;
    reach.downSince = Date.now();
    handlers.onDown();
  });
  redis.on('ready', () => {
    const downSince = reach.downSince;
    reach.downSince = null;
    if (downSince !== null && !handlers.ignored()) handlers.onBack(Date.now() - downSince);
  });
  return reach;
}
