import { escapeHtml, hiddenInputs, htmlPage } from './login-page.ts';
import { MAX_QUERY_LENGTH, type PatientSummary } from './patient-picker.ts';
import type { PickerView } from './picker-flow.ts';

export interface PickerPageModel {
  clientName: string;
  /** The authorization request parameters, carried as hidden fields. */
  params: Record<string, string>;
  csrfToken: string;
  view: PickerView;
}

function choice(p: PatientSummary, i: number): string {
  const meta = [p.birthDate && `born ${p.birthDate}`, p.gender, `id ${p.id}`].filter(Boolean).join(' · ');
  return `<div class="choice"><input type="radio" id="patient-${i}" name="patient" value="${escapeHtml(p.id)}">` +
    `<label for="patient-${i}">${escapeHtml(p.name)}<span class="meta">${escapeHtml(meta)}</span></label></div>`;
}

function emptyText(v: PickerView): string {
  switch (v.empty) {
    case 'none': return 'There are no patient records here to choose from. Patients must be added before this app can be used.';
    case 'unlinked': return 'No patient record is linked to your account, so there is no patient to choose.';
    default: return v.query.trim() ? `No patient matches “${v.query.trim()}”.` : 'No more patients to show.';
  }
}

function searchBox(v: PickerView): string {
  return `<label for="patient_name">Patient name</label>
<div class="search"><input id="patient_name" name="patient_name" type="search" autocomplete="off" spellcheck="false" maxlength="${MAX_QUERY_LENGTH}" value="${escapeHtml(v.name)}">
<button type="submit" name="action" value="search">Search</button></div>`;
}

function patientList(v: PickerView): string {
  if (v.patients.length === 0) return v.error && v.empty === null ? '' : `<p class="note" role="status">${escapeHtml(emptyText(v))}</p>`;
  const legend = v.query.trim() ? `Patients matching “${v.query.trim()}”` : 'Patients';
  return `<fieldset><legend>${escapeHtml(legend)}</legend>\n${v.patients.map(choice).join('\n')}\n</fieldset>`;
}

/**
 * The patient picker of a SMART standalone launch (`launch/patient`), shown at `/oauth2/authorize` after
 * sign-in: a name search, the matching Patients as radio buttons, Continue and Cancel. Plain HTML with
 * the login page's stylesheet and no script; every value escaped. Two forms, so that the Enter key
 * presses the button a user means: Search in the search box (the first form's one button), Continue
 * on a chosen patient (the second form's first button; More patients comes after it).
 */
export function pickerPage(m: PickerPageModel): string {
  const v = m.view;
  const fields: Record<string, string> = { ...m.params, csrf_token: m.csrfToken, login_ticket: v.ticket, patient_query: v.query };
  if (v.page) fields.patient_page = v.page;
  if (v.next) fields.patient_next = v.next;
  const searchable = v.empty !== 'none' && v.empty !== 'unlinked';
  const who = v.userName ? `\n<p class="note">Signed in as ${escapeHtml(v.userName)}.</p>` : '';
  return htmlPage('Choose a patient', `
<h1>Choose a patient</h1>
<p><strong>${escapeHtml(m.clientName)}</strong> works with one patient's record. Choose the patient.</p>${who}
${v.error ? `<p class="error" id="picker-error" role="alert">${escapeHtml(v.error)}</p>` : ''}
${searchable ? `<form method="post" action="authorize">\n${hiddenInputs(fields)}\n${searchBox(v)}\n</form>\n` : ''}<form method="post" action="authorize">
${hiddenInputs(fields)}
${patientList(v)}
<div class="actions">
${v.patients.length ? '<button type="submit" name="action" value="pick">Continue</button>\n' : ''}<button type="submit" name="action" value="cancel" class="secondary">Cancel</button>
</div>
${v.next ? '<p><button type="submit" name="action" value="next" class="secondary">More patients</button></p>\n' : ''}</form>`);
}
