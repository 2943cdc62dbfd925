import type { FileSink } from 'bun';
import { accessSync, constants, mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import type { ByteRange, ExportSink, SinkWriter } from './sink.ts';

function fileWriter(path: string): SinkWriter {
  mkdirSync(dirname(path), { recursive: true });
  const sink: FileSink = Bun.file(path).writer({ highWaterMark: 1 << 20 });
  return {
    async write(chunk) {
      sink.write(chunk);
      await sink.flush();
    },
    async close() {
      await sink.end();
    },
    async abort() {
      await sink.end();
      rmSync(path, { force: true });
    },
  };
}

/** Export files on the local disk under `dir` (the default storage). */
export function createFileSink(dir: string): ExportSink {
  const root = resolve(dir);
  const pathOf = (key: string) => {
    const path = resolve(root, key);
    if (!path.startsWith(root + sep)) throw new Error(`export key escapes the storage directory: ${key}`);
    return path;
  };
  return {
    kind: 'file',
    open: (key) => fileWriter(pathOf(key)),
    async size(key) {
      try {
        return statSync(pathOf(key)).size;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return null;
        throw err;
      }
    },
    read(key, range?: ByteRange) {
      const file = Bun.file(pathOf(key));
      return (range ? file.slice(range.start, range.end + 1) : file).stream();
    },
    async removePrefix(prefix) {
      rmSync(pathOf(prefix), { recursive: true, force: true });
    },
    async check() {
      mkdirSync(root, { recursive: true });
      accessSync(root, constants.W_OK);
    },
  };
}

