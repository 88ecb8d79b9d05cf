/**
 * The run page's style and script, inlined into the page (docs/run-page.md): nothing is fetched,
 * so the page opens from `file://` and as a CI artifact. The script only links the views: a click
 * (or Enter/Space) on a step in the graph, the timeline or the list selects it in all three.
 */
import { STATE_COLOURS } from './dag.js';
import type { StepState } from './run-model.js';

const stateRules = (Object.entries(STATE_COLOURS) as [StepState, { fill: string; border: string }][])
  .map(([state, { fill, border }]) => `.state-${state}{--fill:${fill};--border:${border}}`)
  .join('\n');

export const PAGE_STYLE = `
:root{color-scheme:light;--text:#101828;--muted:#475467;--line:#eaecf0;--accent:#1570ef}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--text);background:#fff}
header,main{padding:12px 24px}
header{border-bottom:1px solid var(--line);background:#f9fafb}
h1{font-size:20px;margin:0 0 4px}
h2{font-size:16px;margin:24px 0 8px}
h3{font-size:15px;margin:16px 0 6px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f9fafb;border:1px solid var(--line);padding:8px;overflow:auto;max-height:22em;white-space:pre-wrap;word-break:break-all}
.muted{color:var(--muted)}
.banner{border:1px solid #fec84b;background:#fffaeb;padding:8px 12px;border-radius:6px;margin:8px 0}
.banner.gone{border-color:#fda29b;background:#fef3f2}
${stateRules}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;border:1px solid var(--border,#98a2b3);background:var(--fill,#fff);font-size:12px;white-space:nowrap}
.outcome-completed{--fill:#d3f2d9;--border:#1f7a35}.outcome-failed{--fill:#fbd5d5;--border:#b42318}
.outcome-canceled{--fill:#fde7c6;--border:#b54708}.outcome-running{--fill:#d1e9ff;--border:#1570ef}.outcome-stopped{--fill:#fbd5d5;--border:#b42318}
.totals span{margin-right:10px}
.legend{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0}
.dag{overflow:auto;border:1px solid var(--line);border-radius:6px;max-height:70vh;padding:8px}
.dag svg{max-width:none;height:auto}
.dag g.node{cursor:pointer}
.dag g.node.selected polygon,.dag g.node.selected path{stroke:var(--accent);stroke-width:4px}
.dag g.node:focus{outline:none}
.dag g.node:focus polygon,.dag g.node:focus path{stroke:var(--accent);stroke-width:4px}
.dag g.cluster.selected path,.dag g.cluster.selected polygon{stroke:var(--accent);stroke-width:3px}
.dag-toggle{font:inherit;padding:2px 10px;border:1px solid var(--line);border-radius:6px;background:#fff;cursor:pointer}
.dag-toggle[aria-pressed="true"]{background:#eff8ff;border-color:var(--accent)}
.badge.mark{--fill:#fef0c7;--border:#dc6803;font-size:11px;padding:0 6px}
.tgroup>summary{list-style:none}
.tgroup>summary::-webkit-details-marker{display:none}
.tgroup>summary .name::before{content:"▸ ";color:var(--muted)}.tgroup[open]>summary .name::before{content:"▾ "}
.tgroup>summary.selected{background:#eff8ff;outline:2px solid var(--accent);outline-offset:-2px}
.tgroup>.trow .name{padding-left:24px}
.seg.group-span{opacity:.85;border-style:dashed}
.steps .group>details>summary{padding:4px 8px;cursor:pointer}
.steps .group>details.selected>summary{background:#eff8ff;outline:2px solid var(--accent);outline-offset:-2px}
.steps .group>details>.steps{margin-left:20px;border-left:3px double var(--line)}
.timeline{border:1px solid var(--line);border-radius:6px;overflow:auto}
.axis,.trow{display:grid;grid-template-columns:minmax(120px,220px) 1fr;align-items:center}
.axis{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);z-index:1;height:22px}
.ticks{position:relative;height:22px}
.tick{position:absolute;top:3px;font-size:11px;color:var(--muted);border-left:1px solid var(--line);padding-left:3px;height:19px}
.wave>summary{padding:4px 8px;background:#f9fafb;border-bottom:1px solid var(--line);cursor:pointer;font-weight:600}
.trow{width:100%;border:0;border-bottom:1px solid #f2f4f7;background:none;padding:0;text-align:left;font:inherit;cursor:pointer;min-height:24px;content-visibility:auto;contain-intrinsic-size:auto 24px}
.trow:hover{background:#f9fafb}.trow.selected{background:#eff8ff;outline:2px solid var(--accent);outline-offset:-2px}
.trow .name{padding:2px 8px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.track{position:relative;height:20px}
.seg{position:absolute;top:4px;height:12px;min-width:2px;border-radius:2px}
.seg.attempt{background:var(--fill);border:1px solid var(--border)}
.seg.attempt.failed{--fill:#fbd5d5;--border:#b42318}.seg.attempt.success{--fill:#d3f2d9;--border:#1f7a35}
.seg.attempt.running{--fill:#d1e9ff;--border:#1570ef}
.seg.attempt.timed-out{background:repeating-linear-gradient(135deg,#fbd5d5 0 4px,#f97066 4px 6px)}
.seg.wave-wait{top:8px;height:4px;background:repeating-linear-gradient(90deg,#98a2b3 0 3px,transparent 3px 6px)}
.seg.launch-wait{top:7px;height:6px;background:#fdb022}
.seg.settle-wait{top:9px;height:2px;background:#d0d5dd}
.seg.retry-gap{top:9px;height:2px;background:#f97066}
.seg .mark{position:absolute;left:100%;top:-2px;margin-left:3px;font-size:10px;line-height:12px;color:#b42318;font-weight:600}
.steps{list-style:none;padding:0;margin:0}
.steps>li{border-bottom:1px solid var(--line);content-visibility:auto;contain-intrinsic-size:auto 32px}
.steps details>summary{padding:4px 8px;cursor:pointer}
.steps details.selected>summary{background:#eff8ff;outline:2px solid var(--accent);outline-offset:-2px}
.steps details[open]>summary{background:#f9fafb}
.detail{padding:4px 16px 12px}
.detail dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
.detail dt{color:var(--muted)}
.detail dd{margin:0;word-break:break-word}
table{border-collapse:collapse}
td,th{border-bottom:1px solid var(--line);padding:3px 10px 3px 0;text-align:left;vertical-align:top}
.critical-path ol{display:flex;flex-wrap:wrap;gap:4px;list-style:none;padding:0;margin:4px 0}
.critical-path li::after{content:" →";color:var(--muted)}.critical-path li:last-child::after{content:""}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.nested{border-left:3px solid var(--line);padding-left:12px;margin-left:4px}
`;

/**
 * Links the three views; written as plain ES5 so every browser that opens the file runs it.
 * A step's (or a matrix group's) elements share `data-step`; a matrix instance's also carry
 * `data-group`, its group's key, so selecting it outlines its group's box in the grouped graph.
 */
export const PAGE_SCRIPT = `
(function(){
  function all(sel){return document.querySelectorAll(sel);}
  var marked=[];
  function mark(el){el.classList.add('selected');if(el.hasAttribute('aria-pressed'))el.setAttribute('aria-pressed','true');marked.push(el);}
  function openUp(el,except){for(var d=el;d;d=d.parentElement?d.parentElement.closest('details'):null){if(d.tagName==='DETAILS'&&d!==except)d.open=true;}}
  function select(key,scroll,except){
    for(var i=0;i<marked.length;i++){marked[i].classList.remove('selected');if(marked[i].hasAttribute('aria-pressed'))marked[i].setAttribute('aria-pressed','false');}
    marked=[];
    var els=all('[data-step="'+key+'"]');var group=null;
    for(var j=0;j<els.length;j++){mark(els[j]);
      if(els[j].tagName==='DETAILS'||els[j].classList.contains('trow'))openUp(els[j],except);
      if(els[j].getAttribute('data-group'))group=els[j].getAttribute('data-group');}
    if(group){var boxes=all('.dag [data-step="'+group+'"]');for(var k=0;k<boxes.length;k++)mark(boxes[k]);}
    if(scroll){var d=document.getElementById('step-'+key);if(d&&d.scrollIntoView)d.scrollIntoView({block:'nearest'});}
    if(history.replaceState)history.replaceState(null,'','#step-'+key);
  }
  // An arrow read out as "s0->s4" tells a screen reader nothing the list does not say better.
  var edges=all('.dag g.edge');for(var x=0;x<edges.length;x++)edges[x].setAttribute('aria-hidden','true');
  var nodes=all('.dag g.node[id^="dag"], .dag g.cluster[id^="dagx-"]');
  for(var n=0;n<nodes.length;n++){var g=nodes[n];var key=g.id.slice(g.id.indexOf('-')+1);g.setAttribute('data-step',key);
    if(g.classList.contains('cluster'))continue;
    g.setAttribute('tabindex','0');g.setAttribute('role','button');
    var t=g.querySelector('title');var a=g.querySelector('a');g.setAttribute('aria-label',(a&&a.getAttribute('xlink:title'))||(t?t.textContent:key));}
  document.addEventListener('click',function(e){
    var t=e.target&&e.target.closest?e.target:null;if(!t)return;
    var toggle=t.closest('button.dag-toggle');
    if(toggle){var run=toggle.getAttribute('data-dag');var on=toggle.getAttribute('aria-pressed')!=='true';
      toggle.setAttribute('aria-pressed',on?'true':'false');toggle.textContent=on?'Group each matrix step':'Show every matrix instance';
      document.getElementById('dag-'+run).hidden=on;document.getElementById('dagx-'+run).hidden=!on;return;}
    var summary=t.closest('summary');
    if(summary){var det=summary.parentElement;if(det&&det.hasAttribute('data-step'))select(det.getAttribute('data-step'),false,det);return;}
    var el=t.closest('[data-step]');
    if(!el||el.tagName==='DETAILS')return;
    e.preventDefault();select(el.getAttribute('data-step'),true);
  });
  document.addEventListener('keydown',function(e){
    if(e.key!=='Enter'&&e.key!==' ')return;
    var el=e.target&&e.target.closest?e.target.closest('g.node[data-step]'):null;
    if(!el)return;e.preventDefault();select(el.getAttribute('data-step'),true);
  });
  var hash=location.hash.match(/^#step-([\\w-]+)$/);if(hash)select(hash[1],true);
})();
`;
