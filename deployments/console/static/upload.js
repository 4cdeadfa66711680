// Drag and drop onto the drop zone: put the file into the form's input and send it for checking.
(function () {
  const zone = document.getElementById("dropzone");
  const input = document.getElementById("sheet");
  const form = document.getElementById("upload-form");
  if (!zone || !input || !form) return;
  ["dragenter", "dragover"].forEach((t) => zone.addEventListener(t, (e) => { e.preventDefault(); zone.classList.add("over"); }));
  ["dragleave", "drop"].forEach((t) => zone.addEventListener(t, (e) => { e.preventDefault(); zone.classList.remove("over"); }));
  zone.addEventListener("drop", (e) => {
    if (!e.dataTransfer || !e.dataTransfer.files.length) return;
    input.files = e.dataTransfer.files;
    form.submit();
  });
  input.addEventListener("change", () => { if (input.files.length) form.submit(); });
})();
