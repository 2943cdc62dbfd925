import { Database } from 'bun:sqlite';
import postgres from 'postgres';

/**
 * Rows that belong to no current resource row (index, words, compartments) or to no resource at all
 * (history), by table: what an expunge must never leave behind.
 */
export async function orphans(kind: string, url: string): Promise<Record<string, number>> {
  const owned = ['search_index', 'search_string', 'search_range', 'search_composite', 'compartments'];
  const out: Record<string, number> = {};
  if (kind === 'sqlite') {
    const db = new Database(url, { readonly: true });
    try {
      for (const t of [...owned, 'search_text_recent', 'search_text_stale']) {
        out[t] = db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM ${t} WHERE res NOT IN (SELECT pk FROM resources)`).get()!.n;
      }
      out.search_text = db.query<{ n: number }, []>('SELECT COUNT(*) AS n FROM search_text WHERE rowid NOT IN (SELECT pk FROM resources)').get()!.n;
      out.resource_history = db.query<{ n: number }, []>(
        'SELECT COUNT(*) AS n FROM resource_history h WHERE NOT EXISTS (SELECT 1 FROM resources r WHERE r.tenant = h.tenant AND r.type = h.type AND r.id = h.id)',
      ).get()!.n;
      out.subscription_notifications = db.query<{ n: number }, []>(
        'SELECT COUNT(*) AS n FROM subscription_notifications n WHERE NOT EXISTS (SELECT 1 FROM resources r WHERE r.tenant = n.tenant AND r.type = n.type AND r.id = n.resource_id)',
      ).get()!.n;
    } finally {
      db.close();
    }
    return out;
  }
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    for (const t of [...owned, 'search_text']) {
      out[t] = (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ${sql(t)} WHERE res NOT IN (SELECT pk FROM resources)`)[0]!.n;
    }
    out.resource_history = (await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM resource_history h WHERE NOT EXISTS (SELECT 1 FROM resources r WHERE r.tenant = h.tenant AND r.type = h.type AND r.id = h.id)`)[0]!.n;
    out.subscription_notifications = (await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM subscription_notifications n WHERE NOT EXISTS (SELECT 1 FROM resources r WHERE r.tenant = n.tenant AND r.type = n.type AND r.id = n.resource_id)`)[0]!.n;
  } finally {
    await sql.end();
  }
  return out;
}


/** Runs statements on the database directly (set-up a test cannot make through Cinder). */
export async function rawSql(kind: string, url: string, statements: string[]): Promise<void> {
  if (kind === 'sqlite') {
    const db = new Database(url);
    try {
      for (const st of statements) db.exec(st);
    } finally {
      db.close();
    }
    return;
  }
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    for (const st of statements) await sql.unsafe(st);
  } finally {
    await sql.end();
  }
}
