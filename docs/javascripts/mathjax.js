window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex"}
};
// A heading's math ($Q^*$ in a notebook's title) reaches the menus, the header and the footer as plain text: mark it up
// as arithmatex marks up the page's, so that MathJax typesets it there too.
const menuMath = () => document.querySelectorAll(".md-ellipsis").forEach(el => {
  if (!el.querySelector(".arithmatex") && /\$[^$]+\$/.test(el.textContent))
    el.innerHTML = el.innerHTML.replace(/\$([^$]+)\$/g, '<span class="arithmatex">\\($1\\)</span>');
});
document$.subscribe(() => { menuMath(); MathJax.typesetPromise() })
