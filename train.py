"""Train a CLIP-BART summarizer: `python train.py +experiment=demo` (see conf/ and README)."""

from mmsum.cli.train import main

if __name__ == "__main__":
    main()
