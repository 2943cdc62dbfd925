/**
 * A narrative (Narrative.div) is parsed as XML: one well-formed `div` in the XHTML namespace, XML's
 * entities only, the elements and attributes of txt-1's list, and some content (txt-2). R4
 * narrative.html; README, Validation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
});
afterAll(() => t.close());

const NS = 'xmlns="http://www.w3.org/1999/xhtml"';
const patient = (div: string): Json => ({ resourceType: 'Patient', text: { status: 'generated', div } });

/** The issues of the 422 refusing a Patient with this narrative, as `expression code`. */
async function refused(div: string): Promise<string[]> {
  const outcome = await expectOutcome(await api.post('Patient', patient(div)), 422);
  return (outcome.issue as Json[]).map((i) => `${i.expression[0]} ${i.code}`);
}

/** The texts of the refusal's issues. */
async function refusedWith(div: string): Promise<string[]> {
  const outcome = await expectOutcome(await api.post('Patient', patient(div)), 422);
  return (outcome.issue as Json[]).map((i) => i.details.text as string);
}

describe('valid narratives are stored', () => {
  const valid = [
    `<div ${NS}><p>Jane Doe</p></div>`,
    `<div ${NS}>\n  <p>a &amp; b &lt; c &gt; d &quot;e&quot; &apos;f&apos;</p>\n</div>`,
    `<div ${NS}>no-break&#160;space, &#xA0; and &#x1F600;</div>`,
    `<div ${NS}><!-- generated --><b>x</b></div>`,
    `<div ${NS}><![CDATA[a < b]]></div>`,
    `<div ${NS}><img src="data:image/png;base64,iVBORw0KGgo=" alt="chart"/></div>`,
    `<div ${NS} lang="en" xml:lang="en" dir="ltr" class="c" id="n1" style="color: red"><span title='single quotes'>x</span ></div>`,
    `<div ${NS}><table border="1"><thead><tr><th colspan="2">h</th></tr></thead><tbody><tr><td rowspan="1">1</td><td/></tr></tbody></table></div>`,
    `<div ${NS}><a href="http://example.org/?a=1&amp;b=2" name="top">link</a><br/><hr /></div>`,
    `<x:div xmlns:x="http://www.w3.org/1999/xhtml"><x:p>prefixed</x:p></x:div>`,
    `  <div ${NS}>surrounding whitespace</div>\n`,
    `<div ${NS}><p>javascript: is text here</p><a href="https://example.org/javascript:x">not a scheme</a></div>`,
  ];
  test("basic HTML, XML's entities and character references, comments, CDATA, images, namespace prefixes", async () => {
    for (const div of valid) {
      const res = await api.post('Patient', patient(div));
      expect({ div, status: res.status, body: res.status === 201 ? '' : await res.text() }).toEqual({ div, status: 201, body: '' });
    }
  });
});

describe('the narrative is XML', () => {
  test('without the XHTML namespace, or in another one, it is no XHTML div', async () => {
    expect(await refused('<div>hi</div>')).toEqual(['Patient.text.div invariant']);
    expect(await refused('<div xmlns="http://example.org/other">hi</div>')).toEqual(['Patient.text.div invariant']);
    expect(await refused(`<div ${NS}><p xmlns="">hi</p></div>`)).toEqual(['Patient.text.div invariant']);
    expect(await refusedWith('<div>hi</div>')).toEqual(['the narrative must be a <div> in the XHTML namespace, <div xmlns="http://www.w3.org/1999/xhtml"> (txt-1)']);
  });

  test('it must be well-formed', async () => {
    const malformed = [
      `<div ${NS}><p>hi</div>`,
      `<div ${NS}><p>hi</p>`,
      `<div ${NS}>hi</div></p>`,
      `<div ${NS}><b><i>x</b></i></div>`,
      `<div ${NS}><p class=x>hi</p></div>`,
      `<div ${NS}><p class="a" class="b">hi</p></div>`,
      `<div ${NS}><p title="a < b">hi</p></div>`,
      `<div ${NS}>a < b</div>`,
      `<div ${NS}>x]]>y</div>`,
      `<div ${NS}><!-- a -- b --></div>`,
      `<div ${NS}><h:p>undeclared prefix</h:p></div>`,
    ];
    for (const div of malformed) expect({ div, issues: await refused(div) }).toEqual({ div, issues: ['Patient.text.div value'] });
    expect((await refusedWith(`<div ${NS}><p>hi</div>`))[0]).toBe('the narrative is not well-formed XHTML: </div> does not close <p> (at character 48)');
  });

  test('one root element: nothing before or after it', async () => {
    for (const div of [`<div ${NS}>x</div><div ${NS}>y</div>`, `<div ${NS}>x</div>y`, `text <div ${NS}>x</div>`, `<?xml version="1.0"?><div ${NS}>x</div>`, `<!DOCTYPE div><div ${NS}>x</div>`, `<!-- c --><div ${NS}>x</div>`]) {
      expect({ div, issues: await refused(div) }).toEqual({ div, issues: ['Patient.text.div value'] });
    }
  });

  test('only the five XML entities and character references: no HTML entities, no bare &', async () => {
    for (const div of [`<div ${NS}>a&nbsp;b</div>`, `<div ${NS}>&copy; 2024</div>`, `<div ${NS}>fish & chips</div>`, `<div ${NS}>a &amp b</div>`, `<div ${NS}><a href="?a=1&b=2">x</a></div>`, `<div ${NS}>&#0;</div>`, `<div ${NS}>&#xD800;</div>`, `<div ${NS}>&#x;</div>`]) {
      expect({ div, issues: await refused(div) }).toEqual({ div, issues: ['Patient.text.div value'] });
    }
    const [text] = await refusedWith(`<div ${NS}>a&nbsp;b</div>`);
    expect(text).toStartWith('the narrative is not well-formed XHTML: &nbsp; is no XML entity');
    expect(text).toContain('&#160;');
  });

  test('processing instructions and declarations are refused inside the div too', async () => {
    for (const div of [`<div ${NS}><?php echo 1 ?>x</div>`, `<div ${NS}><!ENTITY x "y">x</div>`]) {
      expect({ div, issues: await refused(div) }).toEqual({ div, issues: ['Patient.text.div value'] });
    }
  });
});

describe("txt-1: only the XPath's elements and attributes", () => {
  test('elements outside the list are refused, each named once', async () => {
    for (const name of ['foo', 'svg', 'video', 'script', 'form', 'iframe', 'object', 'style', 'body', 'input', 'font', 'center', 'u', 's']) {
      const div = `<div ${NS}><p>text</p><${name}>x</${name}><${name}/></div>`;
      expect({ name, issues: await refusedWith(div) }).toEqual({ name, issues: [`the narrative may not hold <${name}>: only basic HTML elements (txt-1)`] });
    }
    expect(await refused(`<div ${NS}><h:script xmlns:h="http://www.w3.org/1999/xhtml">alert(1)</h:script>x</div>`)).toEqual(['Patient.text.div invariant']);
    expect(await refused(`<p ${NS}>not a div</p>`)).toEqual(['Patient.text.div invariant']);
  });

  test('event handlers and attributes outside the list are refused; so are javascript: links', async () => {
    expect(await refusedWith(`<div ${NS}><a href="#" onclick="steal()">x</a></div>`)).toEqual([
      'the narrative may not hold the attribute onclick (on <a>): only basic HTML attributes, no event handlers (txt-1)',
    ]);
    for (const attribute of ['onload="x()"', 'onMouseOver="x()"', 'data-x="1"', 'xlink:href="#a" xmlns:xlink="http://www.w3.org/1999/xlink"', 'srcset="a.png"', 'target="_blank"']) {
      expect({ attribute, issues: await refused(`<div ${NS}><p ${attribute}>x</p></div>`) }).toEqual({ attribute, issues: ['Patient.text.div invariant'] });
    }
    for (const href of ['javascript:alert(1)', ' JavaScript:alert(1)', 'java&#x09;script:alert(1)', 'javascript&#58;alert(1)', 'vbscript:x']) {
      expect({ href, issues: await refused(`<div ${NS}><a href="${href}">x</a></div>`) }).toEqual({ href, issues: ['Patient.text.div invariant'] });
    }
  });
});

describe('txt-2: some content', () => {
  test('whitespace alone, comments alone or an image without src are no content', async () => {
    for (const div of [`<div ${NS}>  </div>`, `<div ${NS}/>`, `<div ${NS}><p> &#32;&#x0A; </p><!-- note --></div>`, `<div ${NS}><img alt="x"/></div>`]) {
      expect({ div, issues: await refusedWith(div) }).toEqual({ div, issues: ['the narrative must have some non-whitespace content, or an <img> with a src (txt-2)'] });
    }
  });

  test('each problem is reported at the narrative of the resource that has it', async () => {
    const observation = {
      resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: '#p' },
      text: { status: 'generated', div: '<div>no namespace</div>' },
      contained: [{ resourceType: 'Patient', id: 'p', text: { status: 'generated', div: `<div ${NS}>a&nbsp;b</div>` } }],
    };
    const outcome = await expectOutcome(await api.post('Observation', observation), 422);
    expect((outcome.issue as Json[]).map((i) => `${i.expression[0]} ${i.code}`).sort()).toEqual(['Observation.contained[0].text.div value', 'Observation.text.div invariant']);
  });
});
