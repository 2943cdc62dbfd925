/**
 * The array types of PostgreSQL's built-in scalar types, declared to postgres.js at construction instead of
 * fetched from `pg_type` by every new connection (its `fetch_types`: one more round trip, about 4 ms, before
 * a connection's first statement, on every pool's every connection; docs/PERFORMANCE.md). A built-in type's
 * OID and its array type's are fixed in PostgreSQL's catalog (pg_type.dat) and the same in every release;
 * Cinder defines no type of its own. test/store/postgres-array-types.test.ts checks each pair against the
 * server's catalog and sends and reads back an array of each.
 */
import type postgres from 'postgres';

/** [element type OID, array type OID] of the built-in scalar types Cinder may bind or read as arrays. */
export const BUILTIN_ARRAY_TYPES: readonly (readonly [element: number, array: number])[] = [
  [16, 1000], // bool
  [17, 1001], // bytea
  [18, 1002], // char
  [19, 1003], // name
  [20, 1016], // int8
  [21, 1005], // int2
  [23, 1007], // int4
  [25, 1009], // text
  [26, 1028], // oid
  [114, 199], // json
  [700, 1021], // float4
  [701, 1022], // float8
  [1042, 1014], // bpchar
  [1043, 1015], // varchar
  [1082, 1182], // date
  [1083, 1183], // time
  [1114, 1115], // timestamp
  [1184, 1185], // timestamptz
  [1186, 1187], // interval
  [1700, 1231], // numeric
  [2950, 2951], // uuid
  [3614, 3643], // tsvector
  [3802, 3807], // jsonb
];

type Serializer = (value: unknown) => unknown;
type Parser = (text: string) => unknown;

/** The options postgres.js reads per statement, as a connection's `fetch_types` would have filled them. */
interface TypeTables {
  serializers: Record<number, Serializer>;
  parsers: Record<number, Parser>;
  /** Element OID to array OID, for `sql.array(values, elementOid)` (not in postgres.js's published types). */
  shared?: { typeArrayMap?: Record<number, number> };
}

/**
 * Registers BUILTIN_ARRAY_TYPES on `sql` as postgres.js's `fetch_types` registers what it fetches: an array
 * parameter is sent as an array literal of its elements serialised as the element type's are, an array column
 * is read into a JS array of its elements parsed as the element type's. Call on a pool opened with
 * `fetch_types: false`, before its first statement.
 */
export function declareArrayTypes(sql: postgres.Sql<Record<string, unknown>>): void {
  const tables = sql.options as unknown as TypeTables;
  for (const [element, array] of BUILTIN_ARRAY_TYPES) {
    if (tables.shared?.typeArrayMap) tables.shared.typeArrayMap[element] = array;
    const serialize = tables.serializers[element];
    const parse = tables.parsers[element];
    tables.serializers[array] = (xs) => arrayLiteral(xs, serialize);
    tables.parsers[array] = (text) => parseArrayLiteral(text, parse);
  }
}

/**
 * `xs` as a PostgreSQL array literal, each element quoted (`{"a","b\"c",null}`), nested arrays as more
 * dimensions. A value that is not an array (an array literal already written as text) is sent as it is.
 */
export function arrayLiteral(xs: unknown, serialize: Serializer | undefined): unknown {
  if (!Array.isArray(xs)) return xs;
  if (xs.length === 0) return '{}';
  if (Array.isArray(xs[0])) return `{${xs.map((x) => arrayLiteral(x, serialize)).join(',')}}`;
  return `{${xs.map((x) => {
    if (x === undefined) throw new TypeError('an array parameter holds undefined: send null for a missing value');
    if (x === null) return 'null';
    return `"${String(serialize ? serialize(x) : x).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  }).join(',')}}`;
}

/**
 * A PostgreSQL array literal as the server writes it (`{1,2}`, `{{"a b",NULL}}`, `[0:1]={1,2}`) as nested JS
 * arrays: an unquoted NULL is null, every other element is given to `parse` (its text when there is none).
 */
export function parseArrayLiteral(text: string, parse: Parser | undefined): unknown[] {
  let i = text.indexOf('{'); // past a dimension decoration such as [0:1]=
  const element = (raw: string) => (parse ? parse(raw) : raw);
  const dimension = (): unknown[] => {
    const out: unknown[] = [];
    i++; // the '{'
    while (i < text.length) {
      const c = text[i];
      if (c === '}') {
        i++;
        return out;
      }
      if (c === ',') i++;
      else if (c === '{') out.push(dimension());
      else if (c === '"') {
        let value = '';
        for (i++; text[i] !== '"' && i < text.length; i++) {
          if (text[i] === '\\') i++;
          value += text[i];
        }
        i++; // the closing quote
        out.push(element(value));
      } else {
        let end = i;
        while (end < text.length && text[end] !== ',' && text[end] !== '}') end++;
        const raw = text.slice(i, end);
        i = end;
        out.push(raw === 'NULL' ? null : element(raw));
      }
    }
    return out;
  };
  return dimension();
}
