from mmsum.data.prepared import PreparedSplit, PreparedSplitError, PreparedSplitWriter, load_prepared
from mmsum.data.schema import Example

__all__ = ["Example", "PreparedSplit", "PreparedSplitError", "PreparedSplitWriter", "load_prepared"]
