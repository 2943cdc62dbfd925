/**
 * Writes one large FHIR XML Bundle of generated patient records, for measuring `cinder import` of XML.
 *
 *   bun bench/xml-bundle.ts --out FILE [--patients N] [--type transaction|collection] [--seed S]
 *
 * The shared Organizations and Practitioners and N patients' records (bench/lib/generator.ts; 273
 * patients, seed 3: 26,875 entries, about 54 MB as a transaction), each entry with a `urn:uuid:` fullUrl and, in a
 * transaction, a PUT by its id; written pretty-printed by the REST API's writer (toFhirXml).
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { toFhirXml } from '../src/fhir/xml/to-xml.ts';
import { generatePatients } from './lib/generator.ts';

const { values } = parseArgs({
  options: { out: { type: 'string' }, patients: { type: 'string', default: '273' }, type: { type: 'string', default: 'transaction' }, seed: { type: 'string', default: '3' } },
});
if (!values.out || (values.type !== 'transaction' && values.type !== 'collection')) {
  console.error('usage: bun bench/xml-bundle.ts --out FILE [--patients N] [--type transaction|collection] [--seed S]');
  process.exit(2);
}
const transaction = values.type === 'transaction';
const entry = [];
for (const resource of generatePatients({ patients: Number(values.patients), seed: values.seed! })) {
  const { resourceType, id } = resource as { resourceType: string; id: string };
  entry.push({ fullUrl: `urn:uuid:${id}`, resource, ...(transaction ? { request: { method: 'PUT', url: `${resourceType}/${id}` } } : {}) });
}
const xml = toFhirXml({ resourceType: 'Bundle', type: values.type, entry }, true);
writeFileSync(values.out, xml);
console.log(`${values.out}: ${values.type} Bundle of ${entry.length} entries, ${Buffer.byteLength(xml)} bytes`);
