/* dswheels: the index page's line picker. Its data is the page's own (#pick-data); it reads nothing
   else, loads nothing, and writes only text (textContent), never markup. Without it, the table of
   install lines says the same. A choice is kept in the address (#pick=os:...;deepspeed:...), so a
   picked line can be linked. */
(function () {
  "use strict";
  var section = document.getElementById("pick");
  var source = document.getElementById("pick-data");
  if (!section || !source) {
    return;
  }
  var data = JSON.parse(source.textContent);
  var form = document.getElementById("pick-form");
  var out = document.getElementById("pick-line");
  var why = document.getElementById("pick-why");
  var copy = document.getElementById("pick-copy");
  var names = data.axes.map(function (axis) { return axis.name; });
  var all = names.concat(["tool"]);

  function inputs(name) {
    return Array.prototype.slice.call(form.querySelectorAll("input[type=radio]")).filter(function (input) {
      return input.name === name;
    });
  }

  function chosen() {
    var picked = {};
    all.forEach(function (name) {
      var checked = inputs(name).filter(function (input) { return input.checked; })[0];
      picked[name] = checked ? checked.value : "";
    });
    return picked;
  }

  function keyOf(picked) {
    return names.map(function (name) { return picked[name]; }).join("|");
  }

  function reasonOf(key) {
    var index = data.why[key];
    return index === undefined ? "no wheel for this combination" : data.reasons[index];
  }

  function lineOf(picked, wheel) {
    var line = data.lines[wheel.line];
    if (picked.tool === "uv") {
      return line.uv;
    }
    return picked.os.indexOf("win") === 0 ? line.windows : line.pip;
  }

  function update() {
    var picked = chosen();
    names.forEach(function (name) {
      inputs(name).forEach(function (input) {
        var other = {};
        all.forEach(function (n) { other[n] = picked[n]; });
        other[name] = input.value;
        var key = keyOf(other);
        var label = input.parentNode;
        if (data.wheels[key]) {
          label.classList.remove("none");
          label.removeAttribute("title");
        } else {
          label.classList.add("none");
          label.title = reasonOf(key);
        }
      });
    });
    var key = keyOf(picked);
    var wheel = data.wheels[key];
    if (wheel) {
      out.textContent = lineOf(picked, wheel);
      why.textContent = wheel.yanked === null
        ? wheel.file
        : wheel.file + " is yanked (" + wheel.yanked + "): installers skip it unless pinned, as this line pins it";
      copy.disabled = false;
      section.classList.remove("impossible");
    } else {
      out.textContent = "";
      why.textContent = reasonOf(key);
      copy.disabled = true;
      section.classList.add("impossible");
    }
    var state = all.map(function (name) { return name + ":" + picked[name]; }).join(";");
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", "#pick=" + encodeURIComponent(state));
    }
  }

  function choose(name, value) {
    inputs(name).forEach(function (input) { input.checked = input.value === value; });
  }

  function fromAddress() {
    var match = /^#pick=(.*)$/.exec(window.location.hash);
    if (!match) {
      return;
    }
    decodeURIComponent(match[1]).split(";").forEach(function (pair) {
      var at = pair.indexOf(":");
      if (at > 0) {
        choose(pair.slice(0, at), pair.slice(at + 1));
      }
    });
  }

  all.forEach(function (name) {  // newest first: the first value of each axis, then pip
    var first = inputs(name)[0];
    if (first) {
      first.checked = true;
    }
  });
  fromAddress();
  form.addEventListener("change", update);
  copy.addEventListener("click", function () {
    var text = out.textContent;
    var done = function () { copy.textContent = "Copied"; };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { copy.textContent = "Select and copy"; });
    } else {
      var range = document.createRange();
      range.selectNodeContents(out);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
      copy.textContent = document.execCommand("copy") ? "Copied" : "Select and copy";
    }
  });
  section.hidden = false;
  update();
})();
