/* A tiny Windows DLL shaped like a CUDA extension (see README.md): device code in the
   .nv_fatb section, as nvcc/MSVC place it, and imports of a torch DLL (c10.dll), an unknown
   DLL (mystery.dll) besides the C runtime. */
__asm__(".section .nv_fatb,\"dr\"\n.balign 8\n.incbin \"kernel.fatbin\"\n.text\n");

__declspec(dllimport) int c10_answer(void);
__declspec(dllimport) int mystery_answer(void);

__declspec(dllexport) int PyInit_fixture(void) {
    return c10_answer() + mystery_answer();
}
