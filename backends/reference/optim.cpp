#include "backends/reference/reference_backend.h"
