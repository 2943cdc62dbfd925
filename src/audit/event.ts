/**
 * AuditEvents shaped as IHE Basic Audit Log Patterns (BALP 1.1, https://profiles.ihe.net/ITI/BALP/) say,
 * recorded by the server: RESTful interactions (BALP Create/Read/Update/Delete/Query and their
 * Patient* variants) and OAuth events (token issued, sign-in). Pure functions: no store, no clock.
 */
import type { Json } from '../fhir/fhirpath.ts';

const EVENT_TYPE = 'http://terminology.hl7.org/CodeSystem/audit-event-type';
const RESTFUL = 'http://hl7.org/fhir/restful-interaction';
const DCM = 'http://dicom.nema.org/resources/ontology/DCM';
const PARTICIPATION = 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType';
const ENTITY_TYPE = 'http://terminology.hl7.org/CodeSystem/audit-entity-type';
const OBJECT_ROLE = 'http://terminology.hl7.org/CodeSystem/object-role';
const SOURCE_TYPE = 'http://terminology.hl7.org/CodeSystem/security-source-type';
const BALP_ENTITY_TYPE = 'https://profiles.ihe.net/ITI/BALP/CodeSystem/BasicAuditEntityType';
const BALP = 'https://profiles.ihe.net/ITI/BALP/StructureDefinition/';

/** FHIR R4 restful-interaction codes Cinder records (`history` for a history of any level, as BALP queries it). */
export type Interaction =
  | 'read' | 'vread' | 'update' | 'patch' | 'delete' | 'history' | 'create'
  | 'search' | 'capabilities' | 'transaction' | 'batch' | 'operation';

/** AuditEvent.action (R4 audit-event-action): create, read, update, delete, execute. */
export type Action = 'C' | 'R' | 'U' | 'D' | 'E';

/** BALP's action per interaction: queries (search, history), operations and bundles execute. */
export const ACTION: Record<Interaction, Action> = {
  create: 'C', read: 'R', vread: 'R', update: 'U', patch: 'U', delete: 'D',
  search: 'E', history: 'E', capabilities: 'E', transaction: 'E', batch: 'E', operation: 'E',
};

/** AuditEvent.outcome from the HTTP status: 0 success, 4 minor failure (the client's: 4xx), 8 serious failure (the server's: 5xx). */
export function outcomeOf(status: number): '0' | '4' | '8' {
  return status < 400 ? '0' : status < 500 ? '4' : '8';
}

/** Who asked: the OAuth client, and the signed-in user when the token has one. */
export interface Requestor {
  clientId?: string;
  /** The user's FHIR resource (`Practitioner/…`, `Patient/…`) from the token's `fhirUser`. */
  fhirUser?: string;
  /** The token's subject when it is a user (not the client itself). */
  user?: string;
  /** The client's network address, when known. */
  address?: string;
}

/** A resource the interaction touched, with its version when known. */
export interface Touched {
  type: string;
  id: string;
  versionId?: number;
}

export interface RestEvent {
  interaction: Interaction;
  /** The operation's name (`$everything`) for `operation`. */
  operation?: string;
  status: number;
  recorded: string;
  requestor: Requestor;
  /** The server: its FHIR base of the tenant. */
  server: string;
  touched: Touched[];
  /** Patients whose data the interaction read or changed (ids). */
  patients: string[];
  /** The raw query (a search's or history's `METHOD path?query`, or its form), recorded base64 as BALP says: as bytes when its form is not UTF-8. */
  query?: string | Uint8Array;
  requestId?: string;
}

const coding = (system: string, code: string, display?: string) => (display ? { system, code, display } : { system, code });

/** The agents BALP asks for: the client (110153), the server (110152), and the user (IRCP) when there is one; one is the requestor. */
function agents(r: Requestor, server: string): Json[] {
  const hasUser = r.fhirUser !== undefined || r.user !== undefined;
  const client: Json = {
    type: { coding: [coding(DCM, '110153', 'Source Role ID')] },
    who: r.clientId ? { identifier: { system: 'urn:cinder:client', value: r.clientId }, display: r.clientId } : { display: 'unauthenticated' },
    requestor: !hasUser,
    ...(r.address && r.address !== 'unknown' ? { network: { address: r.address, type: '2' } } : {}),
  };
  const serverAgent: Json = {
    type: { coding: [coding(DCM, '110152', 'Destination Role ID')] },
    who: { display: 'Cinder' },
    requestor: false,
    network: { address: server, type: '5' },
  };
  const out = [client, serverAgent];
  if (hasUser) {
    const who: Json = {};
    if (r.fhirUser) who.reference = r.fhirUser;
    if (r.user) who.identifier = { system: 'urn:cinder:user', value: r.user };
    out.push({ type: { coding: [coding(PARTICIPATION, 'IRCP', 'information recipient')] }, who, requestor: true });
  }
  return out;
}

function source(server: string): Json {
  return { site: server, observer: { display: `Cinder at ${server}` }, type: [coding(SOURCE_TYPE, '4', 'Application Server')] };
}

const entityOf = (type: Json, role: Json, more: Json): Json => ({ ...more, type, role });

/** The BALP profile an event of `interaction` conforms to (with a patient: the Patient* variant). */
function profileOf(interaction: Interaction, patient: boolean): string | undefined {
  const name = { create: 'Create', read: 'Read', vread: 'Read', update: 'Update', patch: 'Update', delete: 'Delete', search: 'Query', history: 'Query' }[interaction as string];
  return name ? `${BALP}IHE.BasicAudit.${patient ? 'Patient' : ''}${name}` : undefined;
}

/** The AuditEvent of a RESTful interaction (BALP 1.1 RESTful profiles). The resource content is never recorded. */
export function restAuditEvent(e: RestEvent): Json {
  const entity: Json[] = [];
  for (const t of e.touched) {
    entity.push(entityOf(coding(ENTITY_TYPE, '2', 'System Object'), coding(OBJECT_ROLE, '4', 'Domain Resource'), {
      what: { reference: t.versionId ? `${t.type}/${t.id}/_history/${t.versionId}` : `${t.type}/${t.id}` },
    }));
  }
  for (const id of e.patients) {
    entity.push(entityOf(coding(ENTITY_TYPE, '1', 'Person'), coding(OBJECT_ROLE, '1', 'Patient'), { what: { reference: `Patient/${id}` } }));
  }
  if (e.query !== undefined) {
    entity.push(entityOf(coding(ENTITY_TYPE, '2', 'System Object'), coding(OBJECT_ROLE, '24', 'Query'), { query: (typeof e.query === 'string' ? Buffer.from(e.query) : Buffer.from(e.query.buffer, e.query.byteOffset, e.query.byteLength)).toString('base64') }));
  }
  if (e.requestId) entity.push({ what: { identifier: { value: e.requestId } }, type: coding(BALP_ENTITY_TYPE, 'XrequestId', 'X-Request-Id') });
  const profile = e.status < 400 ? profileOf(e.interaction, e.patients.length > 0) : undefined;
  return {
    resourceType: 'AuditEvent',
    ...(profile ? { meta: { profile: [profile] } } : {}),
    type: coding(EVENT_TYPE, 'rest', 'Restful Operation'),
    subtype: [coding(RESTFUL, e.interaction)],
    action: ACTION[e.interaction],
    recorded: e.recorded,
    outcome: outcomeOf(e.status),
    ...(e.status >= 400 || e.operation ? { outcomeDesc: [e.operation, e.status >= 400 ? `HTTP ${e.status}` : undefined].filter(Boolean).join(' ') } : {}),
    agent: agents(e.requestor, e.server),
    source: source(e.server),
    ...(entity.length ? { entity } : {}),
  };
}

/** An OAuth event: a token issued at the token endpoint, or a sign-in at the login page (success or failure). */
export interface AuthEvent {
  kind: 'token' | 'login';
  ok: boolean;
  recorded: string;
  requestor: Requestor;
  server: string;
  /** The grant type of a token request, or the username tried at the login page. */
  detail: string;
}

/**
 * The AuditEvent of an OAuth event, as BALP's AuthZ consent/token pattern and DICOM's User
 * Authentication (110114, Login 110122) describe; the user's password is never recorded.
 */
export function authAuditEvent(e: AuthEvent): Json {
  const type = e.kind === 'login'
    ? { type: coding(DCM, '110114', 'User Authentication'), subtype: [coding(DCM, '110122', 'Login')], action: 'E' }
    : { type: coding(DCM, '110114', 'User Authentication'), subtype: [coding('urn:cinder:oauth', 'token', 'OAuth token issued')], action: 'E' };
  return {
    resourceType: 'AuditEvent',
    ...type,
    recorded: e.recorded,
    outcome: e.ok ? '0' : '4',
    outcomeDesc: e.kind === 'login' ? `${e.ok ? 'signed in' : 'sign-in failed'}: ${e.detail}` : `${e.ok ? 'token issued' : 'token refused'}: ${e.detail}`,
    agent: agents(e.requestor, e.server),
    source: source(e.server),
  };
}

/** What an operator's command acted on, with what it said about it (`entity.detail`: a prune's cut-off, a count). */
export interface AdminTarget {
  kind: 'client' | 'user' | 'tenant' | 'key';
  id: string;
  detail?: [string, string][];
}

/** What an operator did with the command line (`cinder client disable`, `cinder audit prune`, ...). */
export interface AdminEvent {
  /** The command, e.g. `client disable`. */
  command: string;
  targets: AdminTarget[];
  recorded: string;
  /** Who ran the command, as the operating system names them. */
  operator: string;
  server: string;
  /** What the command did, for `outcomeDesc` (default: `cinder <command> <ids>`). */
  description?: string;
  /** `8` (Serious failure): the command ended in an error, after what `description` says it did; default `0`. */
  outcome?: '0' | '8';
}

const ISO_21089 = 'http://terminology.hl7.org/CodeSystem/iso-21089-lifecycle';

/**
 * The event type of a command: DICOM's Security Alert (110113) with the kind of security change as its subtype
 * (User Security Attributes Changed for clients and users, Software Configuration for a new tenant, Security
 * Configuration for new signing keys, and for stopping what may rest on leaked ones); ISO 21089's Destroy for an expunge, DICOM's Audit Log Used for a prune.
 */
function commandType(command: string): { type: Json; subtype: Json[] } {
  const alert = (code: string, display: string) => ({ type: coding(DCM, '110113', 'Security Alert'), subtype: [coding(DCM, code, display)] });
  if (command === 'tenant create') return alert('110131', 'Software Configuration');
  if (command === 'keys rotate' || command === 'keys review') return alert('110129', 'Security Configuration');
  if (command === 'expunge') return { type: coding(ISO_21089, 'destroy', 'Destroy/Delete'), subtype: [] };
  if (command === 'audit prune') return { type: coding(DCM, '110101', 'Audit Log Used'), subtype: [] };
  return alert('110137', 'User Security Attributes Changed');
}

const ROLE: Record<AdminTarget['kind'], Json> = {
  client: coding(OBJECT_ROLE, '13', 'Security Resource'),
  user: coding(OBJECT_ROLE, '11', 'Security User Entity'),
  tenant: coding(OBJECT_ROLE, '17', 'Data Repository'),
  key: coding(OBJECT_ROLE, '13', 'Security Resource'),
};

/**
 * The AuditEvent of an operator's command: its type (commandType), the command as a subtype of its own
 * (`urn:cinder:admin|client-disable`), the client, user, tenant or keys as the entities, the operator as the requestor.
 */
export function adminAuditEvent(e: AdminEvent): Json {
  const { type, subtype } = commandType(e.command);
  const action = /(create)$/.test(e.command) ? 'C' : /(delete|expunge|prune)$/.test(e.command) ? 'D' : 'U';
  return {
    resourceType: 'AuditEvent',
    type,
    subtype: [...subtype, coding('urn:cinder:admin', e.command.replace(' ', '-'), `cinder ${e.command}`)],
    action,
    recorded: e.recorded,
    outcome: e.outcome ?? '0',
    outcomeDesc: e.description ?? `cinder ${e.command} ${e.targets.map((t) => t.id).join(' ')}`,
    agent: [
      { type: { coding: [coding(DCM, '110153', 'Source Role ID')] }, who: { display: `cinder command line, run by ${e.operator}` }, requestor: true },
      { type: { coding: [coding(DCM, '110152', 'Destination Role ID')] }, who: { display: 'Cinder' }, requestor: false, network: { address: e.server, type: '5' } },
    ],
    source: source(e.server),
    entity: e.targets.map((t) => entityOf(coding(ENTITY_TYPE, '2', 'System Object'), ROLE[t.kind], {
      what: { identifier: { system: `urn:cinder:${t.kind}`, value: t.id } },
      ...(t.detail?.length ? { detail: t.detail.map(([name, value]) => ({ type: name, valueString: value })) } : {}),
    })),
  };
}
