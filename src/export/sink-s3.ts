import { S3Client, type S3Options } from 'bun';
import type { ByteRange, ExportSink, SinkWriter } from './sink.ts';

/** Multipart part size: S3 needs at least 5 MiB per part but the last. */
const PART_SIZE = 8 * 1024 * 1024;

/** The standard S3_* variables, falling back to AWS_* ones (as Bun documents for S3Client). */
export function s3OptionsFromEnv(env: Record<string, string | undefined>): S3Options {
  // An empty variable is unset: it leaves the AWS_* fallback (as an empty CINDER_* leaves its default).
  const given = (v: string | undefined) => (v === '' ? undefined : v);
  const pick = (name: string) => given(env[`S3_${name}`]) ?? given(env[`AWS_${name}`]);
  const options: S3Options = {};
  const accessKeyId = pick('ACCESS_KEY_ID');
  const secretAccessKey = pick('SECRET_ACCESS_KEY');
  const sessionToken = pick('SESSION_TOKEN');
  const region = pick('REGION') ?? given(env.AWS_DEFAULT_REGION);
  const endpoint = pick('ENDPOINT') ?? given(env.AWS_ENDPOINT_URL_S3) ?? given(env.AWS_ENDPOINT_URL);
  if (accessKeyId) options.accessKeyId = accessKeyId;
  if (secretAccessKey) options.secretAccessKey = secretAccessKey;
  if (sessionToken) options.sessionToken = sessionToken;
  if (region) options.region = region;
  if (endpoint) options.endpoint = endpoint;
  if (pick('VIRTUAL_HOSTED_STYLE') === 'true') options.virtualHostedStyle = true;
  return options;
}

function s3Writer(client: S3Client, key: string): SinkWriter {
  const sink = client.file(key).writer({ partSize: PART_SIZE, queueSize: 2, retry: 3, type: 'application/fhir+ndjson' });
  let buffered = 0;
  return {
    async write(chunk) {
      await sink.write(chunk);
      buffered += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.byteLength;
      // Wait for the upload once a part's worth is buffered, so memory stays bounded.
      if (buffered >= PART_SIZE) {
        buffered = 0;
        await sink.flush();
      }
    },
    async close() {
      await sink.end();
    },
    async abort() {
      await Promise.resolve(sink.end(new Error('aborted'))).catch(() => undefined);
      await client.delete(key).catch(() => undefined);
    },
  };
}

/** How long a reachability answer about the bucket is reused (/readyz may be polled often). */
const CHECK_TTL_MS = 10_000;
const CHECK_TIMEOUT_MS = 3_000;
/** Lists at most one key under the prefix, within a timeout; each answer is reused for CHECK_TTL_MS. */
function reachability(client: S3Client, prefix: string): () => Promise<void> {
  let last: { at: number; result: Promise<void> } | undefined;
  return () => {
    if (last && Date.now() - last.at < CHECK_TTL_MS) return last.result;
    const result = Promise.race([
      client.list({ maxKeys: 1, ...(prefix ? { prefix: `${prefix}/` } : {}) }).then(() => undefined),
      Bun.sleep(CHECK_TIMEOUT_MS).then(() => {
        throw new Error('the S3 export storage did not answer in time');
      }),
    ]);
    result.catch(() => undefined);
    last = { at: Date.now(), result };
    return result;
  };
}

/** Attempts of one DELETE before its error is reported (S3 asks clients to retry 5xx answers). */
const DELETE_ATTEMPTS = 3;

async function deleteRetried(client: S3Client, key: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.delete(key);
    } catch (err) {
      if (attempt >= DELETE_ATTEMPTS) throw err;
      await Bun.sleep(100 * 3 ** (attempt - 1));
    }
  }
}

/** Export files in an S3 bucket (any S3-compatible service), under `prefix`. */
export function createS3Sink(options: S3Options, prefix: string): ExportSink {
  const client = new S3Client(options);
  const keyOf = (key: string) => (prefix ? `${prefix}/${key}` : key);
  return {
    kind: 's3',
    open: (key) => s3Writer(client, keyOf(key)),
    async size(key) {
      try {
        return (await client.file(keyOf(key)).stat()).size;
      } catch (err) {
        // Only a missing key is a missing file: an unreachable or failing S3 is not (ExportSink.size throws).
        if ((err as { code?: unknown } | null)?.code === 'NoSuchKey') return null;
        throw err;
      }
    },
    read(key, range?: ByteRange) {
      const file = client.file(keyOf(key));
      return (range ? file.slice(range.start, range.end + 1) : file).stream();
    },
    async removePrefix(dir) {
      const p = keyOf(dir).replace(/\/?$/, '/');
      let token: string | undefined;
      // One key at a time (a job has a file per type and output chunk: few), every key tried even when
      // one fails, the first failure thrown at the end. An S3-compatible server that keeps keys as
      // files in directories (s3rver, the tests' server) fails when sibling keys are deleted at once.
      let failed: unknown;
      do {
        const page = await client.list({ prefix: p, ...(token ? { continuationToken: token } : {}) });
        for (const o of page.contents ?? []) {
          try {
            await deleteRetried(client, o.key);
          } catch (err) {
            failed ??= err;
          }
        }
        token = page.isTruncated ? page.nextContinuationToken : undefined;
      } while (token);
      if (failed !== undefined) throw failed;
    },
    presign: (key, seconds) => client.presign(keyOf(key), { method: 'GET', expiresIn: seconds }),
    check: reachability(client, prefix),
  };
}
