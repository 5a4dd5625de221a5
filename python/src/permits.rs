//! What `SemaphoreHandle` and `ExpirableSemaphoreHandle` share: the name and the permit
//! count's set-up and reading, each blocking and as an awaitable, over the core semaphore's
//! methods of the same names. [`permit_class`] puts them into each class (pyo3 takes one
//! `#[pymethods]` block per class).

/// `permit_class!(Class.field { methods })`: the one `#[pymethods]` block of `Class`, whose
/// `field` is a core semaphore: its own `methods`, then the calls every semaphore has.
macro_rules! permit_class {
    ($class:ident . $field:ident { $($methods:tt)* }) => {
        $crate::permits::permit_class!(@calls $class . $field { $($methods)* }
            try_set_permits, try_set_permits_async (permits: i64) -> bool;
            add_permits, add_permits_async (permits: i64) -> ();
            available_permits, available_permits_async () -> i64;
        );
    };
    (@calls $class:ident . $field:ident { $($methods:tt)* }
        $($call:ident, $call_async:ident ($($arg:ident: $type:ty),*) -> $returns:ty;)+
    ) => {
        #[pyo3::pymethods]
        impl $class {
            $($methods)*

            #[getter]
            fn name(&self) -> &str {
                self.$field.name()
            }

            $(
                /// Blocks (GIL released, Ctrl-C honoured).
                fn $call(&self, py: pyo3::Python<'_>, $($arg: $type),*) -> pyo3::PyResult<$returns> {
                    crate::wait::wait_interruptibly(py, self.$field.$call($($arg),*))
                }

                fn $call_async<'py>(
                    &self,
                    py: pyo3::Python<'py>,
                    $($arg: $type),*
                ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    let semaphore = self.$field.clone();
                    crate::asyncio::awaitable(py, async move { semaphore.$call($($arg),*).await })
                }
            )+
        }
    };
}

pub(crate) use permit_class;
