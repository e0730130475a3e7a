// Builds with AddressSanitizer (the asan preset) only: dlclose() does nothing, so that every
// shared object stays mapped until exit. OpenMPI loads its components (mca_*.so) with dlopen and
// unloads them in MPI_Finalize, leaving memory that was never meant to be freed; LeakSanitizer
// reports at exit, when an unloaded component's frames no longer name a module, so its
// suppressions (cmake/lsan_openmpi.supp) could only match through the full stacks of the slow
// unwinder (fast_unwind_on_malloc=0), which made the sanitized MPI tests 3-5x slower. With the
// components kept, the fast unwinder's first frames name them. This strong definition overrides
// the sanitizer runtime's weak dlclose interceptor; tt_common is linked whole into every
// executable of the chapters (tests, apps), so it takes effect there.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TT_KEEP_MODULES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TT_KEEP_MODULES 1
#endif

#if TT_KEEP_MODULES
/// dlclose(3) without the unloading (sanitizer builds): returns 0, the handle stays valid.
extern "C" int dlclose(void* handle) {
  (void)handle;
  return 0;
}
#endif
