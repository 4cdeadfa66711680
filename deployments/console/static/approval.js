// The approval form: Approve stays disabled until every name-check finding is acknowledged (the server checks too).
(function () {
  const form = document.getElementById("approval-form");
  const approve = document.getElementById("approve");
  if (!form || !approve) return;
  const boxes = Array.from(form.querySelectorAll("input.ack-box"));
  const update = () => { approve.disabled = !boxes.every((b) => b.checked); };
  boxes.forEach((b) => b.addEventListener("change", update));
  update();
})();
