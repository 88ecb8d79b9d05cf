/**
 * What `capsule doctor --redis URL` says about scale-out (docs/cli.md#capsule-doctor,
 * docs/scale-out.md#running-workers): whether Redis answers and which version it is, how many
 * coordinator sessions are announced there now, and whether the shared key is there.
 */
import { SESSIONS_KEY, sharedKey } from './job.js';
import { connectRedis, redisUrlText } from './redis.js';

/** The findings, as `capsule doctor --json` prints them under `scale_out`. */
export interface ScaleOutCheck {
  /** The URL, its password masked. */
  readonly url: string;
  readonly redis: { readonly ok: true; readonly version: string; readonly sessions: number } | { readonly ok: false; readonly error: string };
  readonly key: { readonly ok: true; readonly source: string } | { readonly ok: false; readonly error: string };
  readonly ok: boolean;
}

export async function checkScaleOut(url: string, keyFile: string | undefined): Promise<ScaleOutCheck> {
  let key: ScaleOutCheck['key'];
  try {
    sharedKey(keyFile);
    key = { ok: true, source: keyFile ?? '$CAPSULE_SCALE_OUT_KEY' };
  } catch (error) {
    key = { ok: false, error: (error as Error).message };
  }
  let redis: ScaleOutCheck['redis'];
  try {
    const connection = await connectRedis(url, 'capsule-doctor');
    try {
      const info = await connection.info('server');
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
      redis = { ok: true, version, sessions: await connection.scard(SESSIONS_KEY) };
    } finally {
      connection.disconnect();
    }
  } catch (error) {
    redis = { ok: false, error: (error as Error).message };
  }
  return { url: redisUrlText(url), redis, key, ok: redis.ok && key.ok };
}

/** The findings in one line. */
export function describeScaleOut(check: ScaleOutCheck): string {
  const redis = check.redis.ok ? `Redis ${check.redis.version} answers at ${check.url}; ${check.redis.sessions} coordinator session(s) announced there now` : `refused — ${check.redis.error}`;
  const key = check.key.ok ? `shared key: ${check.key.source}` : `shared key: missing — ${check.key.error}`;
  return `scale-out: ${redis}; ${key}`;
}
